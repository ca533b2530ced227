//! Things that look like secrets but are not: none of them may change.

use crate::samples::pem;
use crate::support::{rand, redact_text, ALNUM, BASE64, UPPER_ALNUM};
use condense_model::{Block, Content, Conversation, Image, ImageSource, Message, RawJson, Role};
use condense_testing::{run, stage, tool_result, MemoryHost};
use redact_secrets::RedactSecrets;

fn lookalikes() -> Vec<(&'static str, String)> {
    vec![
        (
            "git sha",
            "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)".into(),
        ),
        (
            "short sha and tree",
            "[main 9fceb02] fix\n tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904".into(),
        ),
        (
            "uuid",
            "session 550e8400-e29b-41d4-a716-446655440000 started".into(),
        ),
        (
            "sk- in prose",
            "see the task-sk-list and the sk-learn docs".into(),
        ),
        (
            "sk- package name",
            "pip install sk-learn-contrib-imbalanced-learn-extension-package".into(),
        ),
        (
            "sk- word without digits",
            "sk-abcdefghijklmnopqrstuvwxyzabcdefghijkl is all letters".into(),
        ),
        (
            "AKIA in a short word",
            "the AKIATEST fixture and AKIA alone".into(),
        ),
        (
            "AKIA run longer than an id",
            format!("AKIA{} is 21 long", rand(1, 17, UPPER_ALNUM)),
        ),
        (
            "AKIA glued to a word",
            format!("XAKIA{}", rand(2, 16, UPPER_ALNUM)),
        ),
        (
            "base64 image data in text",
            format!(
                "data:image/png;base64,iVBORw0KGgo{}==",
                rand(3, 40_000, BASE64)
            ),
        ),
        (
            "base64 json",
            "payload eyJrZXkiOiAidmFsdWUiLCAibGlzdCI6IFsxLCAyLCAzXX0= decoded".into(),
        ),
        (
            "eyJ word that is not a JWT",
            "eyJhbGciOiJIUzI1NiJ9 is only a header".into(),
        ),
        (
            "two-segment eyJ",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0 has no signature".into(),
        ),
        (
            "url without password",
            "https://github.com/org/repo/pull/12?x=1#top".into(),
        ),
        (
            "url with user only",
            "ssh://git@github.com:22/org/repo.git".into(),
        ),
        (
            "url with port",
            "http://localhost:8080/api and https://host:443/".into(),
        ),
        ("scp-like git url", "git@github.com:org/repo.git".into()),
        (
            "url password template",
            "postgres://app:${DB_PASSWORD}@db/app and redis://:$REDIS_PASS@cache".into(),
        ),
        (
            "url password already masked",
            "postgres://app:****@db/app".into(),
        ),
        (
            "email",
            "mail alice@example.com or mailto:bob@example.com".into(),
        ),
        ("certificate", pem("CERTIFICATE", 4, "\n")),
        ("public key", pem("PUBLIC KEY", 5, "\n")),
        ("rsa public key", pem("RSA PUBLIC KEY", 6, "\n")),
        (
            "ssh public key",
            format!(
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{} me@host",
                rand(7, 43, BASE64)
            ),
        ),
        ("short ghp_", "the ghp_ prefix, ghp_example, ghp_123".into()),
        (
            "placeholder tokens",
            "xoxb-your-token-here and glpat-short".into(),
        ),
        ("short AIza", "AIzaSy is the start of a Google key".into()),
        ("stripe test key", format!("sk_test_{}", rand(8, 24, ALNUM))),
        (
            "label without a 40-char value",
            "aws_secret_access_key = <your secret here>".into(),
        ),
        (
            "hex digest",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
        ),
        (
            "already redacted",
            "token [REDACTED:github-token] and [REDACTED]".into(),
        ),
    ]
}

#[test]
fn lookalikes_are_left_alone() {
    let stage = stage::<RedactSecrets>("");
    for (what, text) in lookalikes() {
        let (out, output) = redact_text(&stage, &text);
        assert_eq!(out, text, "{what} was changed");
        assert!(output.report.events.is_empty(), "{what}");
        assert_eq!(output.report.blocks_changed, 0, "{what}");
    }
}

#[test]
fn image_data_is_never_scanned() {
    // Even base64 that happens to hold a token-shaped run: images are not text.
    let data = format!("iVBORw0KGgo+ghp_{}+AAAA", rand(9, 36, ALNUM));
    let conv = Conversation {
        messages: vec![Message::new(
            "u",
            Role::User,
            vec![tool_result(
                "t",
                Content::blocks(vec![Block::Image(Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data,
                    },
                    extra: RawJson::default(),
                })]),
                None,
            )],
        )],
        ..Conversation::default()
    };
    let out = run(&stage::<RedactSecrets>(""), &conv, &MemoryHost::default());
    assert_eq!(out.conversation, conv);
}
