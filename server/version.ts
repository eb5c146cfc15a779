/** rill's version, served by `GET /version`. */
export const VERSION = "0.1.0";
