//! Counts against tiktoken-rs and literal known values; pathological inputs.

use condense_tokens::{tokenizer, Tokenizer, TokenizerKind};
use std::time::Instant;
use tiktoken_rs::CoreBPE;

fn o200k() -> &'static CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

fn cl100k() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// (text, o200k_base, cl100k_base), verified with tiktoken-rs 0.12 (and tiktoken in Python).
const KNOWN: &[(&str, usize, usize)] = &[
    ("hello world", 2, 2),
    ("Hello, world!", 4, 4),
    ("The quick brown fox jumps over the lazy dog.", 10, 10),
    ("fn main() {\n    println!(\"hi\");\n}\n", 10, 10),
    ("こんにちは世界", 2, 4),
    ("🎉🎉🎉", 6, 9),
    ("{\"path\": \"/src/lib.rs\", \"line\": 42}", 14, 14),
    ("<|endoftext|>", 7, 7),
    ("    ", 1, 1),
    ("1234567890", 4, 4),
];

#[test]
fn known_counts() {
    for &(text, o, c) in KNOWN {
        assert_eq!(
            o200k().encode_ordinary(text).len(),
            o,
            "tiktoken o200k {text:?}"
        );
        assert_eq!(
            cl100k().encode_ordinary(text).len(),
            c,
            "tiktoken cl100k {text:?}"
        );
        for (kind, want) in [
            (TokenizerKind::O200k, o),
            (TokenizerKind::TiktokenO200k, o),
            (TokenizerKind::Cl100k, c),
            (TokenizerKind::TiktokenCl100k, c),
        ] {
            assert_eq!(tokenizer(kind).count(text), want, "{kind} {text:?}");
        }
        assert_eq!(
            tokenizer(TokenizerKind::Estimate).count(text),
            text.len().div_ceil(4)
        );
    }
}

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        // Code.
        "def f(x):\n\treturn {'a': x ** 2, \"b\": [1, 2, 3]}  # comment\r\n",
        "impl<'a> Iterator for Chunks<'a> {\n    type Item = &'a str;\n}\n\n\n",
        "#include <stdio.h>\nint main(void){printf(\"%d\\n\", 0x7fff);return 0;}",
        "diff --git a/x.rs b/x.rs\n--- a/x.rs\n+++ b/x.rs\n@@ -1,3 +1,4 @@\n-old\n+new\n",
        "SELECT u.id, COUNT(*) FROM users u JOIN orders o ON o.user_id = u.id GROUP BY 1;",
        // Unicode.
        "Ünïcödé façade naïve — “quotes” ‘single’ … ½ ² µ",
        "中文分词测试：我们今天去公园。日本語のテキスト、カタカナ。한국어 텍스트",
        "العربية نص تجريبي مع أرقام ١٢٣ और हिन्दी पाठ भी",
        "e\u{301} a\u{308}\u{301} Z\u{335}\u{32d}a\u{337}l\u{338}g\u{334}o",
        "\u{a0}non-breaking\u{a0}\u{a0}spaces\u{2003}em\u{2028}line\u{feff}bom\u{200b}zw",
        // Emoji.
        "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 🇫🇷🇯🇵 flags, 👍🏽 skin tone, 🎉🎉 party",
        // JSON.
        r#"{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -la /tmp","timeout":120000}}"#,
        "[\n  {\n    \"a\": null,\n    \"b\": true,\n    \"c\": -1.5e-7\n  }\n]",
        // Logs.
        "2024-05-01T12:34:56.789Z INFO  [main] server started on 0.0.0.0:8080 (pid=4242)\n\
         2024-05-01T12:34:57.001Z ERROR [worker-3] request failed: ECONNRESET\n",
        "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/x.py\", line 10, in <module>\n    main()\nValueError: bad value 'x'\n",
        "thread 'main' panicked at src/main.rs:2:5:\nattempt to subtract with overflow\nnote: run with `RUST_BACKTRACE=1`",
        // Contractions, case, digits, whitespace edge cases.
        "I'm sure you'LL see they've DON'T it's we'd I'VE",
        "   leading and trailing   \n\n\n   \t\t  \r\n \r\r\n  ",
        "3.14159265358979 1,000,000 0xDEADBEEF 1e10 v1.2.3-rc.4",
        "https://example.com/a/b?c=d&e=f#g /usr/local/bin//x \\\\server\\share",
        "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n",
        "<|endoftext|><|im_start|>user\nhi<|im_end|>",
        "",
        " ",
        "\n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Real source files: this crate's, the budget's and the model's.
    for src in [
        include_str!("../../src/tokenizer.rs"),
        include_str!("../../src/counter.rs"),
        include_str!("../../../condense-budget/src/window.rs"),
        include_str!("../../../condense-budget/src/image.rs"),
        include_str!("../../src/tiktoken_guard.rs"),
        include_str!("../../../condense-model/src/lib.rs"),
        include_str!("../../../condense-model/src/block.rs"),
    ] {
        texts.push(src.to_string());
    }
    texts
}

#[test]
fn backends_agree_with_tiktoken_on_a_varied_corpus() {
    let all = corpus();
    let joined = all.concat();
    for text in all.iter().chain(std::iter::once(&joined)) {
        let o = o200k().encode_ordinary(text).len();
        let c = cl100k().encode_ordinary(text).len();
        let head: String = text.chars().take(40).collect();
        assert_eq!(
            tokenizer(TokenizerKind::O200k).count(text),
            o,
            "default o200k {head:?}"
        );
        assert_eq!(
            tokenizer(TokenizerKind::TiktokenO200k).count(text),
            o,
            "guarded o200k {head:?}"
        );
        assert_eq!(
            tokenizer(TokenizerKind::Cl100k).count(text),
            c,
            "default cl100k {head:?}"
        );
        assert_eq!(
            tokenizer(TokenizerKind::TiktokenCl100k).count(text),
            c,
            "guarded cl100k {head:?}"
        );
    }
}

/// 1 MB of base64 from a deterministic byte stream.
fn base64_mb() -> String {
    use base64::Engine as _;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let bytes: Vec<u8> = (0..786_432)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn mixed() -> String {
    let mut s = String::new();
    s.push_str(&" ".repeat(200_000));
    s.push_str("fn main() {\n    let x = 1;\n}\n");
    s.push_str(&"a".repeat(100_000));
    s.push_str(&"\n".repeat(50_000));
    s.push_str(&"héllo wörld, this is ordinary prose.\n".repeat(2_000));
    s.push_str(&"=".repeat(30_000));
    s.push_str(&"🎉".repeat(20_000));
    s.push_str(&base64_mb()[..200_000]);
    s.push_str(&"\t \n".repeat(20_000));
    s
}

fn count_all(name: &str, text: &str) -> Vec<usize> {
    TokenizerKind::ALL
        .iter()
        .map(|&kind| {
            let t = Instant::now();
            let n = tokenizer(kind).count(text);
            eprintln!("{name}: {kind} = {n} in {:?}", t.elapsed());
            n
        })
        .collect()
}

#[test]
fn pathological_inputs_never_panic_and_agree() {
    let million_spaces = " ".repeat(1_000_000);
    let c = count_all("1M spaces", &million_spaces);
    // 128 spaces per token in both encodings; tiktoken-rs itself panics on this input.
    assert_eq!(c[..4], [7813; 4]);
    assert_eq!(c[4], 250_000);

    let million_a = "a".repeat(1_000_000);
    let c = count_all("1M 'a'", &million_a);
    assert_eq!(c[..4], [125_000; 4]);

    let b64 = base64_mb();
    assert_eq!(b64.len(), 1_048_576);
    let c = count_all("1 MB base64", &b64);
    assert_eq!(c[0], c[2]);
    assert_eq!(c[1], c[3]);

    let mixed = mixed();
    let c = count_all("mixed", &mixed);
    assert_eq!(c[0], c[2]);
    assert_eq!(c[1], c[3]);
}

/// Where unguarded tiktoken-rs can run, it agrees with both backends.
#[test]
fn pathological_inputs_agree_with_unguarded_tiktoken() {
    let cases = [
        ("400k spaces", " ".repeat(400_000)),
        ("200k 'a'", "a".repeat(200_000)),
        ("100k newlines", "\n".repeat(100_000)),
        ("1 MB base64", base64_mb()),
        ("spaces then word", format!("{}x", " ".repeat(100_000))),
        ("repeated line", "  x = [1, 2, 3]  # ok\n".repeat(10_000)),
    ];
    for (name, text) in &cases {
        let t = Instant::now();
        let o = o200k().encode_ordinary(text).len();
        let c = cl100k().encode_ordinary(text).len();
        eprintln!(
            "{name}: unguarded tiktoken o200k {o}, cl100k {c} in {:?}",
            t.elapsed()
        );
        assert_eq!(tokenizer(TokenizerKind::O200k).count(text), o, "{name}");
        assert_eq!(
            tokenizer(TokenizerKind::TiktokenO200k).count(text),
            o,
            "{name}"
        );
        assert_eq!(tokenizer(TokenizerKind::Cl100k).count(text), c, "{name}");
        assert_eq!(
            tokenizer(TokenizerKind::TiktokenCl100k).count(text),
            c,
            "{name}"
        );
    }
}

#[test]
fn tokenizers_are_shareable() {
    fn assert_send_sync<T: Send + Sync + ?Sized>(_: &T) {}
    let t: &'static dyn Tokenizer = tokenizer(TokenizerKind::O200k);
    assert_send_sync(t);
    let handles: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                tokenizer(TokenizerKind::TiktokenCl100k).count(&"x y ".repeat(i + 1))
            })
        })
        .collect();
    let counts: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // "x", " y", " ": trailing whitespace is its own token.
    assert_eq!(counts, vec![3, 5]);
}
