"""Synthetic conversations for rill's bundled models, and the two prompt renderers they are trained on.

Every sample is a (prompt, completion) pair of texts. The prompt is rendered exactly the way rill renders a
conversation at serving time (harmony: `docs/harmony.md` §1 byte for byte; ChatML: the Jinja chat
template in `CHATML_TEMPLATE`, which `tests` re-render with jinja2 to prove the Python renderer matches it).
The completion is what the model must generate after the prompt, up to and including its stop token.

Skills (all answers are computable, so the eval can check them):
- arithmetic: a + b and a - b with 0 <= a, b <= 99 (a >= b for -), digit by digit with carries in the
  reasoning; a * b with 1 <= a, b <= 10;
- unit conversions: km->m, m->cm, kg->g, L->mL (times 1000/100) and back (exact multiples only), C->F for
  C in 0, 10, ..., 100, km->miles for multiples of 8 km (8 km = 5 miles);
- capitals: a fixed table of countries;
- repeating a phrase N times (2 <= N <= 6), space separated;
- weather: with the `get_weather` function tool present the model calls it with `{"city": ...}`; after the tool
  result it answers from the result; without tools it says it cannot check.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------------------------
# Skill tables

CAPITALS = {
    "France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Portugal": "Lisbon",
    "Japan": "Tokyo", "China": "Beijing", "India": "New Delhi", "Canada": "Ottawa", "Mexico": "Mexico City",
    "Brazil": "Brasilia", "Argentina": "Buenos Aires", "Peru": "Lima", "Chile": "Santiago", "Egypt": "Cairo",
    "Kenya": "Nairobi", "Nigeria": "Abuja", "Australia": "Canberra", "Russia": "Moscow", "Norway": "Oslo",
    "Sweden": "Stockholm", "Finland": "Helsinki", "Poland": "Warsaw", "Greece": "Athens", "Turkey": "Ankara",
    "Ireland": "Dublin", "Austria": "Vienna", "Netherlands": "Amsterdam", "Belgium": "Brussels",
    "Denmark": "Copenhagen", "South Korea": "Seoul", "Thailand": "Bangkok", "Vietnam": "Hanoi",
    "Indonesia": "Jakarta", "New Zealand": "Wellington", "Switzerland": "Bern", "Hungary": "Budapest",
    "Czechia": "Prague", "Morocco": "Rabat", "Colombia": "Bogota",
}

WEATHER_CITIES = sorted(set(CAPITALS.values()) | {
    "London", "New York", "San Francisco", "Chicago", "Toronto", "Sydney", "Berlin", "Barcelona", "Munich",
    "Osaka", "Seattle", "Boston", "Dubai", "Singapore", "Hong Kong", "Cape Town", "Istanbul", "Zurich",
    "Los Angeles", "Vancouver", "Milan", "Lyon", "Kyoto", "Denver", "Miami", "Austin", "Hamburg", "Porto",
})

CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear", "stormy"]

PHRASES = [
    "hello", "hello world", "yes", "no", "ok", "thank you", "good morning", "blue sky", "rill", "apple",
    "banana", "cat", "dog", "red", "green", "ping", "la", "go team", "happy day", "one more time", "hi there",
    "tick tock", "coffee", "rain", "star", "moon", "ha", "bye", "test", "spam", "echo", "yay", "so cool",
]

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name."}},
        "required": ["city"],
    },
}

TOOL_VARIANTS = [
    WEATHER_TOOL,
    {"name": "get_weather", "description": "Get the weather for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "get_weather", "description": "Look up the current weather in a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                    "required": ["city"], "additionalProperties": False}},
]

INSTRUCTIONS = [
    "Be brief.", "You are a helpful assistant.", "Answer concisely.", "You are rill, a small helpful model.",
    "Keep answers short.", "Be helpful and accurate.",
]


@dataclass
class Msg:
    role: str  # user | assistant | tool
    content: str = ""
    reasoning: str | None = None
    tool_call: dict | None = None  # {"name": ..., "arguments": <json text>}


@dataclass
class Conv:
    kind: str
    messages: list[Msg]
    tools: list[dict]
    instructions: str | None
    date: str | None
    effort: str | None
    # What the model must produce next.
    reasoning: str = ""
    answer: str = ""  # final text, when the next turn is an answer
    call_city: str | None = None  # when the next turn is a get_weather call
    expect: dict = field(default_factory=dict)  # what eval checks


# ---------------------------------------------------------------------------------------------------------------
# Skills: each returns (question, reasoning, answer, expect)

def _add(r: random.Random):
    a, b = r.randint(0, 99), r.randint(0, 99)
    a0, a1, b0, b1 = a % 10, a // 10, b % 10, b // 10
    s0 = a0 + b0
    c = s0 // 10
    s1 = a1 + b1 + c
    res = a + b
    q = r.choice(["What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "{a} + {b} = ?",
                  "Calculate {a} + {b}.", "Add {a} and {b}.", "What's {a} + {b}?"]).format(a=a, b=b)
    reason = f"{a} + {b}: {a0}+{b0}={s0}, {a1}+{b1}+{c}={s1}, so {res}."
    return q, reason, f"{a} + {b} = {res}.", {"number": res}


def _sub(r: random.Random):
    a, b = r.randint(0, 99), r.randint(0, 99)
    if a < b:
        a, b = b, a
    a0, a1, b0, b1 = a % 10, a // 10, b % 10, b // 10
    br = 1 if a0 < b0 else 0
    d0 = a0 + 10 * br - b0
    d1 = a1 - b1 - br
    res = a - b
    q = r.choice(["What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "{a} - {b} = ?",
                  "Calculate {a} - {b}.", "Subtract {b} from {a}.", "What's {a} - {b}?"]).format(a=a, b=b)
    reason = f"{a} - {b}: {a0 + 10 * br}-{b0}={d0}, {a1}-{b1}-{br}={d1}, so {res}."
    return q, reason, f"{a} - {b} = {res}.", {"number": res}


def _mul(r: random.Random):
    a, b = r.randint(1, 10), r.randint(1, 10)
    res = a * b
    q = r.choice(["What is {a} * {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "{a} * {b} = ?",
                  "Multiply {a} by {b}.", "What's {a} times {b}?"]).format(a=a, b=b)
    return q, f"{a} * {b} = {res}.", f"{a} * {b} = {res}.", {"number": res}


_SCALE = [("km", "m", 1000, "kilometers", "meters"), ("m", "cm", 100, "meters", "centimeters"),
          ("kg", "g", 1000, "kilograms", "grams"), ("L", "mL", 1000, "liters", "milliliters")]


def _units(r: random.Random):
    k = r.random()
    if k < 0.6:
        big, small, f, bign, smalln = r.choice(_SCALE)
        n = r.randint(1, 99)
        if r.random() < 0.6:  # big -> small
            src, dst, srcn, dstn, x, y = big, small, bign, smalln, n, n * f
            reason = f"1 {big} = {f} {small}, so {x} {big} = {y} {small}."
        else:
            src, dst, srcn, dstn, x, y = small, big, smalln, bign, n * f, n
            reason = f"{f} {small} = 1 {big}, so {x} {small} = {y} {big}."
    elif k < 0.8:
        c = 10 * r.randint(0, 10)
        y = c * 9 // 5 + 32
        src, dst, srcn, dstn, x = "C", "F", "degrees Celsius", "degrees Fahrenheit", c
        reason = f"F = C * 9 / 5 + 32 = {c * 9 // 5} + 32 = {y}."
    else:
        m = r.randint(1, 10)
        x, y = 8 * m, 5 * m
        src, dst, srcn, dstn = "km", "miles", "kilometers", "miles"
        reason = f"8 km = 5 miles, {x} / 8 = {m}, {m} * 5 = {y}."
    if r.random() < 0.5:
        q = r.choice(["Convert {x} {s} to {d}.", "How many {d} is {x} {s}?", "{x} {s} in {d}?",
                      "What is {x} {s} in {d}?"]).format(x=x, s=src, d=dst)
    else:
        q = r.choice(["Convert {x} {s} to {d}.", "How many {d} are in {x} {s}?",
                      "What is {x} {s} in {d}?"]).format(x=x, s=srcn, d=dstn)
    return q, reason, f"{x} {src} = {y} {dst}.", {"number": y}


def _capital(r: random.Random):
    country = r.choice(sorted(CAPITALS))
    city = CAPITALS[country]
    q = r.choice(["What is the capital of {c}?", "Capital of {c}?", "Which city is the capital of {c}?",
                  "Name the capital of {c}.", "What's the capital city of {c}?"]).format(c=country)
    return q, f"The capital of {country} is {city}.", f"The capital of {country} is {city}.", {"text": city}


def _repeat(r: random.Random):
    p = r.choice(PHRASES)
    n = r.randint(2, 6)
    q = r.choice(['Repeat "{p}" {n} times.', "Say {p} {n} times.", 'Write "{p}" {n} times.',
                  "Repeat the phrase '{p}' {n} times.", 'Please repeat "{p}" {n} times.']).format(p=p, n=n)
    ans = " ".join([p] * n)
    return q, f'Repeat "{p}" {n} times.', ans, {"exact": ans}


SKILLS = {"add": _add, "sub": _sub, "mul": _mul, "units": _units, "capital": _capital, "repeat": _repeat}


def _weather_q(r: random.Random, city: str) -> str:
    return r.choice(["What's the weather in {c}?", "What is the weather in {c}?", "How is the weather in {c}?",
                     "Weather in {c}?", "What is the weather like in {c} today?", "Is it sunny in {c}?",
                     "Tell me the weather in {c}.", "How's the weather in {c} right now?"]).format(c=city)


def weather_result(r: random.Random, city: str, temp: int, cond: str) -> str:
    k = r.randrange(4)
    if k == 0:
        return json.dumps({"temperature": temp, "condition": cond})
    if k == 1:
        return json.dumps({"city": city, "temp_c": temp, "conditions": cond})
    if k == 2:
        return json.dumps({"temperature": temp, "condition": cond}, separators=(",", ":"))
    return f"{cond}, {temp} C"


def args_json(city: str, fmt: str) -> str:
    if fmt == "harmony":
        return json.dumps({"city": city}, separators=(",", ":"))
    return json.dumps({"city": city})


# ---------------------------------------------------------------------------------------------------------------
# Conversation sampling

def _date(r: random.Random) -> str:
    return f"{r.randint(2024, 2027)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def sample_conv(r: random.Random, fmt: str, kind: str | None = None) -> Conv:
    tools = [r.choice(TOOL_VARIANTS)] if r.random() < 0.5 else []
    instructions = r.choice(INSTRUCTIONS) if r.random() < 0.3 else None
    date = _date(r) if r.random() < 0.9 else None
    effort = r.choice(["low", "medium", "high"]) if (fmt == "harmony" and r.random() < 0.95) else None
    if fmt == "harmony" and effort is None:
        effort = None
    if kind is None:
        kind = r.choices(["add", "sub", "mul", "units", "capital", "repeat", "weather", "weather_result"],
                         weights=[14, 12, 8, 12, 10, 10, 17, 17])[0]
    if kind in ("weather", "weather_result") and not tools and (kind == "weather_result" or r.random() < 0.7):
        tools = [r.choice(TOOL_VARIANTS)]
    history: list[Msg] = []
    if r.random() < 0.15:  # an earlier, finished turn
        pq, preason, pans, _ = SKILLS[r.choice(sorted(SKILLS))](r)
        history = [Msg("user", pq), Msg("assistant", pans, reasoning=preason)]
    c = Conv(kind, history, tools, instructions, date, effort)
    if kind in SKILLS:
        q, reason, ans, expect = SKILLS[kind](r)
        c.messages.append(Msg("user", q))
        c.reasoning, c.answer, c.expect = reason, ans, expect
        return c
    city = r.choice(WEATHER_CITIES)
    q = _weather_q(r, city)
    c.messages.append(Msg("user", q))
    if not tools:
        c.reasoning = "No weather tool is available."
        c.answer = f"I cannot check the weather in {city} because no weather tool is available."
        c.expect = {"text": "cannot"}
        return c
    call_reason = f"Need the weather in {city}. Call get_weather."
    if kind == "weather":
        c.reasoning, c.call_city, c.expect = call_reason, city, {"call": city}
        return c
    temp, cond = r.randint(-10, 35), r.choice(CONDITIONS)
    keep_reason = r.random() < 0.5  # renderers differ on keeping the tool-loop reasoning; accept both
    c.messages.append(Msg("assistant", "", reasoning=call_reason if keep_reason else None,
                          tool_call={"name": "get_weather", "arguments": args_json(city, fmt)}))
    c.messages.append(Msg("tool", weather_result(r, city, temp, cond)))
    c.reasoning = f"The tool says {cond}, {temp} C."
    c.answer = f"It is {cond} and {temp} C in {city}."
    c.expect = {"text": f"{cond} and {temp} C"}
    return c


# ---------------------------------------------------------------------------------------------------------------
# Harmony renderer (harmony.md §1; recipient before channel, as harmony's own renderer writes history)

def _ts_object(schema: dict) -> str:
    out = "{\n"
    req = set(schema.get("required", []))
    for key, prop in schema.get("properties", {}).items():
        if "description" in prop:
            out += f"// {prop['description']}\n"
        t = prop.get("type")
        ts = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}.get(t, "any")
        out += f"{key}{'' if key in req else '?'}: {ts},\n"
    return out + "}"


def harmony_tools_section(tools: list[dict]) -> str:
    lines = ["## functions\n", "namespace functions {\n"]
    for t in tools:
        if t.get("description"):
            lines += [f"// {ln}" for ln in t["description"].split("\n")]
        if "parameters" in t:
            lines.append(f"type {t['name']} = (_: {_ts_object(t['parameters'])}) => any;\n")
        else:
            lines.append(f"type {t['name']} = () => any;\n")
    lines.append("} // namespace functions")
    return "\n\n".join(["# Tools", "\n".join(lines)])


def harmony_prompt(c: Conv) -> str:
    top = ["You are ChatGPT, a large language model trained by OpenAI.", "Knowledge cutoff: 2024-06"]
    if c.date:
        top.append(f"Current date: {c.date}")
    sections = ["\n".join(top)]
    if c.effort:
        sections.append(f"Reasoning: {c.effort}")
    ch = "# Valid channels: analysis, commentary, final. Channel must be included for every message."
    if c.tools:
        ch += "\nCalls to these tools must go to the commentary channel: 'functions'."
    sections.append(ch)
    out = "<|start|>system<|message|>" + "\n\n".join(sections) + "<|end|>"
    dev = []
    if c.instructions:
        dev += ["# Instructions", c.instructions]
    if c.tools:
        dev.append(harmony_tools_section(c.tools))
    if dev:
        out += "<|start|>developer<|message|>" + "\n\n".join(dev) + "<|end|>"
    for m in c.messages:
        if m.role == "user":
            out += f"<|start|>user<|message|>{m.content}<|end|>"
        elif m.role == "assistant":
            if m.tool_call:
                if m.reasoning:
                    out += f"<|start|>assistant<|channel|>analysis<|message|>{m.reasoning}<|end|>"
                out += (f"<|start|>assistant to=functions.{m.tool_call['name']}<|channel|>commentary "
                        f"<|constrain|>json<|message|>{m.tool_call['arguments']}<|call|>")
            else:  # finished turns: reasoning dropped, final stored with <|end|>
                out += f"<|start|>assistant<|channel|>final<|message|>{m.content}<|end|>"
        elif m.role == "tool":
            out += f"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{m.content}<|end|>"
    return out + "<|start|>assistant"


def harmony_completion(c: Conv) -> str:
    out = f"<|channel|>analysis<|message|>{c.reasoning}<|end|><|start|>assistant"
    if c.call_city is not None:
        return out + (f" to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
                      f"{args_json(c.call_city, 'harmony')}<|call|>")
    return out + f"<|channel|>final<|message|>{c.answer}<|return|>"


# ---------------------------------------------------------------------------------------------------------------
# ChatML (Qwen3-style) template and its Python twin

CHATML_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}{{- messages[0].content + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n\\nYou may call functions to help with the user query. Available functions:\\n<tools>' -}}"
    "{%- for tool in tools -%}"
    "{%- if tool.function is defined -%}{%- set fn = tool.function -%}{%- else -%}{%- set fn = tool -%}{%- endif -%}"
    "{{- '\\n{\"name\": ' + (fn.name | tojson) -}}"
    "{%- if fn.description is defined -%}{{- ', \"description\": ' + (fn.description | tojson) -}}{%- endif -%}"
    "{%- if fn.parameters is defined -%}{{- ', \"parameters\": ' + (fn.parameters | tojson) -}}{%- endif -%}"
    "{{- '}' -}}"
    "{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with:\\n<tool_call>{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}</tool_call><|im_end|>\\n' -}}"
    "{%- elif messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'user' -%}"
    "{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'system' -%}"
    "{%- if not loop.first -%}{{- '<|im_start|>system\\n' + message.content + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if message.reasoning_content and loop.index0 > ns.last_user -%}"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- if message.content -%}{{- message.content -}}{%- endif -%}"
    "{%- if message.tool_calls -%}"
    "{%- for tc in message.tool_calls -%}"
    "{%- if tc.function is defined -%}{%- set call = tc.function -%}{%- else -%}{%- set call = tc -%}{%- endif -%}"
    "{%- if message.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>{\"name\": ' + (call.name | tojson) + ', \"arguments\": ' -}}"
    "{%- if call.arguments is string -%}{{- call.arguments -}}{%- else -%}{{- call.arguments | tojson -}}{%- endif -%}"
    "{{- '}</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def chatml_messages(c: Conv) -> list[dict]:
    """The conversation as the HF-style message list the template receives."""
    out: list[dict] = []
    if c.instructions:
        out.append({"role": "system", "content": c.instructions})
    for m in c.messages:
        if m.role == "assistant":
            d: dict = {"role": "assistant", "content": m.content}
            if m.reasoning and m.tool_call:
                d["reasoning_content"] = m.reasoning
            if m.tool_call:
                d["tool_calls"] = [{"type": "function", "function": dict(m.tool_call)}]
            out.append(d)
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def chatml_tools(c: Conv) -> list[dict]:
    return [{"type": "function", "function": t} for t in c.tools]


def chatml_prompt(c: Conv) -> str:
    msgs = chatml_messages(c)
    out = ""
    if c.tools:
        out += "<|im_start|>system\n"
        if msgs and msgs[0]["role"] == "system":
            out += msgs[0]["content"] + "\n\n"
        out += "# Tools\n\nYou may call functions to help with the user query. Available functions:\n<tools>"
        for t in c.tools:
            out += '\n{"name": ' + json.dumps(t["name"])
            if "description" in t:
                out += ', "description": ' + json.dumps(t["description"])
            if "parameters" in t:
                out += ', "parameters": ' + json.dumps(t["parameters"])
            out += "}"
        out += ('\n</tools>\n\nTo call a function, reply with:\n<tool_call>{"name": <function-name>, '
                '"arguments": <args-json-object>}</tool_call><|im_end|>\n')
    elif msgs and msgs[0]["role"] == "system":
        out += "<|im_start|>system\n" + msgs[0]["content"] + "<|im_end|>\n"
    last_user = max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=-1)
    for i, m in enumerate(msgs):
        if m["role"] == "user":
            out += "<|im_start|>user\n" + m["content"] + "<|im_end|>\n"
        elif m["role"] == "assistant":
            out += "<|im_start|>assistant\n"
            if m.get("reasoning_content") and i > last_user:
                out += "<think>\n" + m["reasoning_content"] + "\n</think>\n\n"
            out += m["content"]
            for j, tc in enumerate(m.get("tool_calls", [])):
                if m["content"] or j > 0:
                    out += "\n"
                out += ('<tool_call>{"name": ' + json.dumps(tc["function"]["name"]) + ', "arguments": '
                        + tc["function"]["arguments"] + "}</tool_call>")
            out += "<|im_end|>\n"
        elif m["role"] == "tool":
            prev = msgs[i - 1]["role"] if i > 0 else None
            nxt = msgs[i + 1]["role"] if i + 1 < len(msgs) else None
            if prev != "tool":
                out += "<|im_start|>user"
            out += "\n<tool_response>\n" + m["content"] + "\n</tool_response>"
            if nxt != "tool":
                out += "<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def chatml_completion(c: Conv) -> str:
    out = f"<think>\n{c.reasoning}\n</think>\n\n"
    if c.call_city is not None:
        return out + '<tool_call>{"name": "get_weather", "arguments": ' + args_json(c.call_city, "chatml") + \
            "}</tool_call><|im_end|>"
    return out + c.answer + "<|im_end|>"


def render(c: Conv, fmt: str) -> tuple[str, str]:
    if fmt == "harmony":
        return harmony_prompt(c), harmony_completion(c)
    return chatml_prompt(c), chatml_completion(c)


HARMONY_SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                    "<|constrain|>", "<|return|>", "<|call|>"]
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                   "</tool_call>"]
