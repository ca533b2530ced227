//! The built-in secret patterns and the user's, compiled.
//!
//! The `regex` crate has no look-around, so what a regex cannot say is checked in code after a
//! match: a **token boundary** (the characters on both sides of the secret must not continue it,
//! so `AKIA` + 17 letters or a key glued into a longer word is not a key) and a **shape check**
//! (a random key holds a digit; prose like `sk-learn-contrib-...` does not).

use regex::{Regex, RegexBuilder};

/// One built-in pattern, as source text.
#[derive(Debug)]
pub struct Builtin {
    /// The placeholder type: `[REDACTED:<name>]`.
    pub name: &'static str,
    /// What it matches, for the docs.
    pub about: &'static str,
    pub regex: &'static str,
    /// Replace only this capture group (1), not the whole match (the label stays).
    pub group: bool,
    pub token_char: Option<fn(char) -> bool>,
    pub check: Option<fn(&str) -> bool>,
    /// For a labelled secret in a JSON object: (key regex, value regex), both anchored.
    pub json_label: Option<(&'static str, &'static str)>,
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}
fn word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}
fn slack_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}
fn url_path_char(c: char) -> bool {
    key_char(c) || c == '/'
}
/// Not `=`: the secret follows one (`AWS_SECRET_ACCESS_KEY=...`).
fn base64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '/')
}
fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}
/// Not a template (`${DB_PASSWORD}`, `$PASS`, `{{ password }}`): those name a secret, they are
/// not one.
fn not_template(s: &str) -> bool {
    !(s.starts_with('$') || s.starts_with("{{"))
}

/// In the order they are applied: a span one pattern replaced is never matched again, so the
/// more specific patterns come first (a token in a URL's password is a `github-token`, not a
/// `url-password`).
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "private-key",
        about: "PEM/OpenSSH/PGP private key blocks (-----BEGIN ... PRIVATE KEY----- to its END \
                line, or to the end of the base64 lines when the END line is missing); \
                certificates and public keys are left alone",
        regex: r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s:,.()\\-]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|(?:(?:\r?\n|\\r?\\n)+(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+: [^\r\n\\]*))*)",
        group: false,
        token_char: None,
        check: None,
        json_label: None,
    },
    Builtin {
        name: "jwt",
        about: "JSON Web Tokens: three base64url segments, header and payload starting eyJ",
        regex: r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
        group: false,
        token_char: Some(key_char),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "anthropic-key",
        about: "Anthropic API and admin keys (sk-ant-...)",
        regex: r"sk-ant-[A-Za-z0-9_-]{32,}",
        group: false,
        token_char: Some(key_char),
        check: Some(has_digit),
        json_label: None,
    },
    Builtin {
        name: "openai-key",
        about: "OpenAI keys: sk-proj-/sk-svcacct-/sk-admin- project keys and legacy sk- keys \
                (32+ alphanumerics without hyphens, holding a digit)",
        regex: r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}|sk-[A-Za-z0-9]{32,}",
        group: false,
        token_char: Some(key_char),
        check: Some(has_digit),
        json_label: None,
    },
    Builtin {
        name: "stripe-key",
        about: "Stripe live secret and restricted keys (sk_live_, rk_live_)",
        regex: r"(?:sk|rk)_live_[A-Za-z0-9]{24,}",
        group: false,
        token_char: Some(word),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "github-token",
        about: "GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_ (36+ alphanumerics) and github_pat_",
        regex: r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255}",
        group: false,
        token_char: Some(word),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "gitlab-token",
        about: "GitLab personal access tokens (glpat-)",
        regex: r"glpat-[A-Za-z0-9_-]{20,}",
        group: false,
        token_char: Some(key_char),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "slack-webhook",
        about: "Slack incoming webhook URLs (https://hooks.slack.com/services/...), whole",
        regex: r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}",
        group: false,
        token_char: Some(url_path_char),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "slack-token",
        about: "Slack tokens (xoxb-, xoxp-, xoxa-, xoxr-, xoxs-)",
        regex: r"xox[baprs]-[A-Za-z0-9-]{10,}",
        group: false,
        token_char: Some(slack_char),
        check: Some(has_digit),
        json_label: None,
    },
    Builtin {
        name: "google-api-key",
        about: "Google API keys (AIza + 35 characters)",
        regex: r"AIza[A-Za-z0-9_-]{35}",
        group: false,
        token_char: Some(key_char),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "aws-akid",
        about: "AWS access key ids (AKIA/ASIA + 16 uppercase alphanumerics)",
        regex: r"(?:AKIA|ASIA)[A-Z0-9]{16}",
        group: false,
        token_char: Some(alnum),
        check: None,
        json_label: None,
    },
    Builtin {
        name: "aws-secret-key",
        about: "AWS secret access keys when labelled (aws_secret_access_key = ..., \
                AWS_SECRET_ACCESS_KEY=..., \"SecretAccessKey\": \"...\"); the label stays",
        regex: r#"(?i:aws[_-]?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key|secret[_-]?access[_-]?key)["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})"#,
        group: true,
        token_char: Some(base64_char),
        check: None,
        json_label: Some((
            r"^(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key)$",
            r"^[A-Za-z0-9/+]{40}$",
        )),
    },
    Builtin {
        name: "aws-session-token",
        about:
            "AWS session tokens when labelled (aws_session_token = ..., \"SessionToken\": \"...\", \
                100+ base64 characters); the label stays",
        regex: r#"(?i:aws[_-]?session[_-]?token|session[_-]?token)["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{100,}={0,2})"#,
        group: true,
        token_char: Some(base64_char),
        check: None,
        json_label: Some((
            r"^(?i:(?:aws[_-]?)?session[_-]?token)$",
            r"^[A-Za-z0-9/+]{100,}={0,2}$",
        )),
    },
    Builtin {
        name: "url-password",
        about: "the password of a URL (scheme://user:password@host keeps scheme, user and host; \
                a raw @, # or ? in the password is included, up to the last @ before the host); \
                templates ($VAR, ${VAR}, {{var}}) and already masked ones (***) are left alone",
        regex: r#"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]"'<>]*:([^\s/"'<>]+)@"#,
        group: true,
        token_char: None,
        check: Some(not_template),
        json_label: None,
    },
];

/// The names of the built-in patterns, in order.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTINS.iter().map(|b| b.name).collect()
}

/// One compiled pattern.
#[derive(Debug)]
pub struct Pattern {
    pub name: String,
    pub regex: Regex,
    /// The capture group holding the secret (0: the whole match).
    pub group: usize,
    pub token_char: Option<fn(char) -> bool>,
    pub check: Option<fn(&str) -> bool>,
    pub json_label: Option<(Regex, Regex)>,
}

/// The size limit of one compiled regex (the `regex` crate's default is 10 MiB).
const REGEX_SIZE_LIMIT: usize = 10 * (1 << 20);

fn compile(source: &str) -> Result<Regex, String> {
    RegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| one_line(&e.to_string()))
}

/// A regex error on one line: the `error: ...` line of a parse error, else all lines joined.
fn one_line(message: &str) -> String {
    message
        .lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| message.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl Pattern {
    /// Compiles a built-in (an error here is a bug, reported rather than panicking).
    pub fn builtin(b: &Builtin) -> Result<Self, String> {
        let err = |e: String| format!("built-in pattern {} does not compile: {e}", b.name);
        let json_label = match b.json_label {
            Some((key, value)) => Some((compile(key).map_err(err)?, compile(value).map_err(err)?)),
            None => None,
        };
        Ok(Pattern {
            name: b.name.to_string(),
            regex: compile(b.regex).map_err(err)?,
            group: usize::from(b.group),
            token_char: b.token_char,
            check: b.check,
            json_label,
        })
    }

    /// Compiles a user pattern: `patterns[index]` in error messages. A capture group named
    /// `secret`, when there is one, is what gets replaced.
    pub fn user(index: usize, name: &str, source: &str) -> Result<Self, String> {
        let at = format!("patterns[{index}] ({name})");
        let regex = compile(source).map_err(|e| format!("{at}: invalid regex: {e}"))?;
        if regex.is_match("") {
            return Err(format!("{at}: regex matches the empty string"));
        }
        let group = regex
            .capture_names()
            .position(|n| n == Some("secret"))
            .unwrap_or(0);
        Ok(Pattern {
            name: name.to_string(),
            regex,
            group,
            token_char: None,
            check: None,
            json_label: None,
        })
    }
}

/// Whether `name` can be a placeholder type: lowercase ASCII letters, digits and `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
