"""Counts every message of an Anthropic request body with tiktoken (o200k_base), the peer of
`condense stats`.

    python count.py FILE              # whole process: load, count, print the total
    python count.py FILE --repeat N   # in-process: also the median of N timed counts (ms)

Prints one JSON line: {"tokens": total, "count_ms": median or null}."""

import json
import statistics
import sys
import time

from common import block_texts, encoding, load_messages


def count(enc, messages):
    return sum(
        len(enc.encode_ordinary(text)) for m in messages for text in block_texts(m)
    )


def main():
    path = sys.argv[1]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--repeat" else 0
    enc = encoding()
    messages = load_messages(path)
    tokens = count(enc, messages)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        count(enc, messages)
        times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times) if times else None
    print(json.dumps({"tokens": tokens, "count_ms": median}))


main()
