"""LangChain's trim_messages to a token budget (the last messages that fit, tiktoken counts),
the peer of a `truncate-oldest` pipeline.

    python trim.py FILE OUT MAX_TOKENS              # whole process: read, trim, write OUT
    python trim.py FILE OUT MAX_TOKENS --repeat N   # also the median of N timed trims (ms)

Prints one JSON line: {"kept": messages kept, "tokens": their tokens, "trim_ms": median or
null}. Each message is counted once (a cache by message), as condense counts each block once."""

import json
import statistics
import sys
import time

from common import block_texts, encoding, load_messages
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    trim_messages,
)


def as_args(value):
    """A tool call's input as LangChain wants its args: an object (a Codex custom tool's input,
    an apply_patch text, is a string: it goes under "input")."""
    return value if isinstance(value, dict) else {"input": value}


def to_langchain(messages):
    """Anthropic messages as LangChain messages: a user's tool results become tool messages."""
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant":
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [
                {"name": b["name"], "args": as_args(b.get("input", {})), "id": b["id"]}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            out.append(AIMessage(content=text, tool_calls=calls))
            continue
        if isinstance(content, str):
            out.append(HumanMessage(content=content))
            continue
        text = []
        for b in content:
            if b.get("type") == "tool_result":
                inner = b.get("content")
                body = inner if isinstance(inner, str) else "".join(
                    p.get("text", "") for p in inner or [] if p.get("type") == "text"
                )
                out.append(ToolMessage(content=body, tool_call_id=b["tool_use_id"]))
            elif b.get("type") == "text":
                text.append(b.get("text", ""))
        if text:
            out.append(HumanMessage(content="".join(text)))
    return out


def main():
    path, out_path, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    repeat = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--repeat" else 0
    enc = encoding()
    raw = load_messages(path)
    messages = to_langchain(raw)
    counts = {}

    def per_message(message: BaseMessage) -> int:
        key = id(message)
        if key not in counts:
            text = message.content if isinstance(message.content, str) else json.dumps(message.content)
            n = len(enc.encode_ordinary(text))
            for call in getattr(message, "tool_calls", None) or []:
                n += len(enc.encode_ordinary(call["name"]))
                n += len(enc.encode_ordinary(json.dumps(call["args"], separators=(",", ":"))))
            counts[key] = n
        return counts[key]

    def trim():
        return trim_messages(
            messages,
            max_tokens=max_tokens,
            token_counter=per_message,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    kept = trim()
    with open(out_path, "w") as f:
        json.dump({"messages": [m.model_dump() for m in kept]}, f)
    times = []
    for _ in range(repeat):
        counts.clear()
        start = time.perf_counter()
        trim()
        times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times) if times else None
    tokens = sum(per_message(m) for m in kept)
    print(json.dumps({"kept": len(kept), "tokens": tokens, "trim_ms": median}))


main()
