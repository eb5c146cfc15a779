import assert from "node:assert/strict";
import { strftime } from "../../prompt/strftime.ts";
import { Template } from "@huggingface/jinja";
import { renderChatTemplate } from "../../prompt/chat_template_render.ts";

// Local-time dates: strftime_now is Python's datetime.now(), which is local time.
const D = new Date(2026, 10, 4, 9, 5, 7);

Deno.test("strftime writes Python's C-locale directives", () => {
  assert.equal(strftime("%d %b %Y", D), "04 Nov 2026");
  assert.equal(
    strftime("%A %a %B %m/%d/%y %H:%M:%S %I %p %j %w %%", D),
    "Wednesday Wed November 11/04/26 09:05:07 09 AM 308 3 %",
  );
  assert.equal(strftime("%Q stays", D), "%Q stays");
  assert.equal(strftime("%j", new Date(2026, 0, 1)), "001");
  assert.equal(strftime("%I %p", new Date(2026, 0, 1, 0, 0)), "12 AM");
  assert.equal(strftime("%I %p", new Date(2026, 0, 1, 13, 0)), "01 PM");
});

Deno.test("renderChatTemplate: strftime_now reads the injected clock; raise_exception and range as in transformers", () => {
  const t = new Template(
    "{{ strftime_now('%d %b %Y') }}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|{{ x }}{% if fail %}{{ raise_exception('no ' + x) }}{% endif %}",
  );
  assert.equal(renderChatTemplate(t, { x: "y", fail: false }, () => D), "04 Nov 2026|135|y");
  assert.equal(renderChatTemplate(t, { x: "y", fail: false }, () => new Date(2027, 0, 9)), "09 Jan 2027|135|y");
  assert.throws(() => renderChatTemplate(t, { x: "y", fail: true }, () => D), /no y/);
});
