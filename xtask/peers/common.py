"""What the peer scripts share: the o200k tokenizer from a local copy of its vocabulary, and
the messages of an Anthropic Messages request body (the file `condense` reads too)."""

import hashlib
import json
import os
import shutil
import sys

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def encoding():
    """tiktoken's o200k_base, built from the vocabulary file named by CONDENSE_BPE_FILE (the
    copy the Rust tiktoken-rs crate ships; tiktoken checks its hash) so no download is needed."""
    bpe = os.environ.get("CONDENSE_BPE_FILE")
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    if bpe and cache:
        os.makedirs(cache, exist_ok=True)
        target = os.path.join(cache, hashlib.sha1(O200K_URL.encode()).hexdigest())
        if not os.path.exists(target):
            shutil.copyfile(bpe, target)
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def load_messages(path):
    with open(path, "rb") as f:
        body = json.load(f)
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        sys.exit(f"{path}: not an Anthropic Messages request body (no messages array)")
    return messages


def block_texts(message):
    """The texts condense counts in a message: text blocks, a tool call's name and input, a
    tool result's content."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
        return
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif kind == "tool_use":
            yield block.get("name", "")
            yield json.dumps(block.get("input", {}), separators=(",", ":"))
        elif kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, str):
                yield inner
            else:
                for part in inner or []:
                    if part.get("type") == "text":
                        yield part.get("text", "")
