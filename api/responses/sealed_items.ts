/**
 * Opens the `encrypted_content` of input items before they become the conversation: a reasoning item takes the
 * text the model wrote (it wins over any `content` the client sent alongside, which it may have edited or dropped),
 * a compaction item takes its summary. A blob that does not verify is a 400 naming the item's field.
 */
import type { ReasoningSeal } from "./reasoning_seal.ts";
import type { InputItem } from "./responses_schema.ts";

export function openSealedItems(
  items: readonly InputItem[],
  seal: ReasoningSeal,
  param: (index: number) => string,
): InputItem[] {
  return items.map((item, i) => {
    if (item.type === "reasoning" && item.encrypted_content != null) {
      const { text } = seal.openReasoning(item.encrypted_content, `${param(i)}.encrypted_content`);
      return { ...item, content: [{ type: "reasoning_text" as const, text }] };
    }
    if (item.type === "compaction") {
      const { summary } = seal.openCompaction(item.encrypted_content, `${param(i)}.encrypted_content`);
      return { ...item, summary };
    }
    return item;
  });
}
