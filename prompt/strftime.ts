/**
 * Python's `datetime.strftime` for the directives chat templates use with transformers' `strftime_now` (Llama 3.x:
 * `"%d %b %Y"`), in the C locale and in local time as Python's `datetime.now()` is. An unknown directive is kept as
 * written, as glibc does.
 */
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const pad = (n: number, width = 2): string => String(n).padStart(width, "0");

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  const utcDay = (x: Date) => Date.UTC(x.getFullYear(), x.getMonth(), x.getDate());
  return (utcDay(d) - utcDay(start)) / 86_400_000 + 1;
}

export function strftime(format: string, d: Date): string {
  return format.replace(/%(.)/gs, (whole, directive: string) => {
    switch (directive) {
      case "a":
        return DAYS[d.getDay()]!.slice(0, 3);
      case "A":
        return DAYS[d.getDay()]!;
      case "b":
        return MONTHS[d.getMonth()]!.slice(0, 3);
      case "B":
        return MONTHS[d.getMonth()]!;
      case "d":
        return pad(d.getDate());
      case "m":
        return pad(d.getMonth() + 1);
      case "y":
        return pad(d.getFullYear() % 100);
      case "Y":
        return String(d.getFullYear());
      case "H":
        return pad(d.getHours());
      case "I":
        return pad(((d.getHours() + 11) % 12) + 1);
      case "p":
        return d.getHours() < 12 ? "AM" : "PM";
      case "M":
        return pad(d.getMinutes());
      case "S":
        return pad(d.getSeconds());
      case "j":
        return pad(dayOfYear(d), 3);
      case "w":
        return String(d.getDay());
      case "%":
        return "%";
      default:
        return whole;
    }
  });
}
