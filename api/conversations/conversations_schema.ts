/**
 * zod schemas for the Conversations API request bodies. Items are validated one by one afterwards, like
 * `/v1/responses` input (conversations_service.ts), so an error names the exact item.
 */
import { z } from "zod";
import { Metadata } from "../responses/responses_schema.ts";

export const ConversationCreateSchema = z.strictObject({
  items: z.array(z.unknown()).nullable().optional(),
  metadata: Metadata.nullable().optional(),
});

export const ConversationUpdateSchema = z.strictObject({
  metadata: Metadata.nullable(),
});

export const ConversationItemsCreateSchema = z.strictObject({
  items: z.array(z.unknown()),
});
