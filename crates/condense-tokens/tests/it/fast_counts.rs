//! The default tokenizers (static tables and a hand-written pre-tokenizer) count exactly as
//! bpe-openai and tiktoken-rs do: every string of every shipped transcript, and each whole file.

use condense_tokens::{tokenizer, TokenCounter, TokenizerKind, LINE_PARTS_FROM};
use std::path::{Path, PathBuf};

fn transcripts() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/transcripts");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".jsonl") || name.ends_with(".json") || name.ends_with(".traj") {
                files.push(f);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    files
}

fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Every string value of a JSON or JSONL file (message texts, tool inputs and outputs...).
fn texts(path: &Path) -> (String, Vec<String>) {
    let raw = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    match serde_json::from_str::<serde_json::Value>(&raw) {
        Ok(v) => strings(&v, &mut out),
        Err(_) => {
            for line in raw.lines().filter(|l| !l.trim().is_empty()) {
                strings(&serde_json::from_str(line).unwrap(), &mut out);
            }
        }
    }
    // Sessions repeat themselves (each request holds the ones before): once is enough.
    out.sort_unstable();
    out.dedup();
    (raw, out)
}

fn same_as_backends(kind: TokenizerKind, tiktoken: TokenizerKind, bpe: &bpe_openai::Tokenizer) {
    let fast = tokenizer(kind);
    let reference = tokenizer(tiktoken);
    let mut strings_seen = 0;
    for path in transcripts() {
        let (raw, texts) = texts(&path);
        for text in texts.iter().chain([&raw]) {
            let n = fast.count(text);
            let want = bpe.count(text.as_str());
            if n != want {
                let pieces: Vec<&str> = bpe.split(text).collect();
                panic!(
                    "{kind} on a string of {}: {n}, bpe-openai {want}; its pieces: {pieces:?}",
                    path.display()
                );
            }
            assert_eq!(n, reference.count(text), "{kind} vs {tiktoken}: {text:?}");
            strings_seen += 1;
        }
    }
    assert!(strings_seen > 10_000, "{strings_seen}");
}

#[test]
fn o200k_counts_as_bpe_openai_and_tiktoken_on_every_transcript() {
    same_as_backends(
        TokenizerKind::O200k,
        TokenizerKind::TiktokenO200k,
        bpe_openai::o200k_base(),
    );
}

#[test]
fn cl100k_counts_as_bpe_openai_and_tiktoken_on_every_transcript() {
    same_as_backends(
        TokenizerKind::Cl100k,
        TokenizerKind::TiktokenCl100k,
        bpe_openai::cl100k_base(),
    );
}

/// Random texts over the characters where the pre-tokenizer's alternatives meet: letters of
/// every case class, marks, digits of several scripts, contractions (with `ſ`), every kind of
/// line break and space, `/`, and long runs.
#[test]
fn adversarial_texts_count_as_bpe_openai() {
    let alphabet = [
        "a",
        "B",
        "ǅ",
        "ʰ",
        "中",
        "\u{301}",
        "\u{903}",
        "1",
        "٣",
        "Ⅻ",
        "'",
        "'s",
        "'S",
        "'ſ",
        "'t",
        "'re",
        "'Ve",
        "'LL",
        "'d",
        "'M",
        "'x",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\u{a0}",
        "\u{2028}",
        "\u{3000}",
        "/",
        "//",
        "-",
        "=",
        "é",
        "🎉",
        "x",
        "Hello",
        " world",
        "HTTPServer",
        "ß",
        "Σσς",
        "Ａ",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (kind, bpe) in [
        (TokenizerKind::O200k, bpe_openai::o200k_base()),
        (TokenizerKind::Cl100k, bpe_openai::cl100k_base()),
    ] {
        let fast = tokenizer(kind);
        for round in 0..3000 {
            let len = 1 + (next() % if round % 100 == 0 { 400 } else { 12 }) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            assert_eq!(
                fast.count(&text),
                bpe.count(text.as_str()),
                "{kind}: {text:?}"
            );
        }
        for text in [
            " ".repeat(5000),
            "\n".repeat(300) + "x",
            "a".repeat(10_000),
            "=".repeat(777) + "\n",
            "1".repeat(100),
            "\u{301}".repeat(50),
        ] {
            assert_eq!(
                fast.count(&text),
                bpe.count(text.as_str()),
                "{kind}: {text:?}"
            );
        }
    }
}

/// Long texts counted line part by line part, with parts seen in earlier texts answered from
/// the cache, count as the whole text does: every long string of every shipped transcript.
#[test]
fn long_texts_count_the_same_by_line_parts() {
    for kind in [TokenizerKind::O200k, TokenizerKind::Cl100k] {
        let counter = TokenCounter::new(kind);
        let whole = tokenizer(kind);
        let mut long = 0;
        for path in transcripts() {
            let (_, texts) = texts(&path);
            for text in texts.iter().filter(|t| t.len() >= LINE_PARTS_FROM) {
                assert_eq!(
                    counter.count_text_cached(text),
                    whole.count(text),
                    "{kind}: {text:?}"
                );
                long += 1;
            }
        }
        assert!(long > 300, "{long}");
        assert!(counter.stats().line_parts > 1000, "{:?}", counter.stats());
    }
}
