//! A table of realistic secrets in realistic surroundings: each is replaced by its typed
//! placeholder, and nothing else in the text changes.

use crate::support::{
    rand, redact_text, ALNUM, BASE64, BASE64URL, DIGITS, LOWER_ALNUM, UPPER_ALNUM,
};
use condense_testing::stage;
use redact_secrets::RedactSecrets;

/// One secret in context. The expected output is `text` with `secret` replaced by `placeholder`.
pub struct Sample {
    pub kind: &'static str,
    pub secret: String,
    pub text: String,
    pub placeholder: String,
}

fn sample(kind: &'static str, secret: String, context: &str) -> Sample {
    Sample {
        kind,
        text: context.replace("{}", &secret),
        placeholder: format!("[REDACTED:{kind}]"),
        secret,
    }
}

fn with_placeholder(mut s: Sample, placeholder: &str) -> Sample {
    s.placeholder = placeholder.to_string();
    s
}

pub const PEM_RSA_BODY_LINES: usize = 6;

/// A PEM block of `label` with a random body.
pub fn pem(label: &str, seed: u64, sep: &str) -> String {
    let mut body = Vec::new();
    for i in 0..PEM_RSA_BODY_LINES {
        body.push(rand(seed + i as u64, 64, BASE64));
    }
    body.push(format!("{}==", rand(seed + 99, 30, BASE64)));
    format!(
        "-----BEGIN {label}-----{sep}{}{sep}-----END {label}-----",
        body.join(sep)
    )
}

pub fn samples() -> Vec<Sample> {
    let slack_ids = |seed| format!("{}-{}", rand(seed, 12, DIGITS), rand(seed + 1, 13, DIGITS));
    vec![
        sample(
            "anthropic-key",
            format!("sk-ant-api03-{}AA", rand(1, 93, BASE64URL)),
            "export ANTHROPIC_API_KEY={}\n",
        ),
        sample(
            "anthropic-key",
            format!("sk-ant-admin01-{}AA", rand(2, 93, BASE64URL)),
            "curl -H 'x-api-key: {}' https://api.anthropic.com/v1/organizations/users",
        ),
        sample(
            "openai-key",
            format!("sk-{}T3BlbkFJ{}", rand(3, 20, ALNUM), rand(4, 20, ALNUM)),
            "OPENAI_API_KEY=\"{}\"",
        ),
        sample(
            "openai-key",
            format!(
                "sk-proj-{}T3BlbkFJ{}",
                rand(5, 74, BASE64URL),
                rand(6, 74, BASE64URL)
            ),
            "client = OpenAI(api_key='{}')",
        ),
        sample(
            "aws-akid",
            format!("AKIA{}", rand(7, 16, UPPER_ALNUM)),
            "aws_access_key_id = {}\n",
        ),
        sample(
            "aws-akid",
            format!("ASIA{}", rand(8, 16, UPPER_ALNUM)),
            "\"AccessKeyId\": \"{}\",",
        ),
        sample(
            "aws-secret-key",
            rand(9, 40, BASE64),
            "[default]\naws_secret_access_key = {}\nregion = us-east-1",
        ),
        sample(
            "aws-secret-key",
            rand(10, 40, BASE64),
            "declare -x AWS_SECRET_ACCESS_KEY={}",
        ),
        sample(
            "aws-secret-key",
            rand(11, 40, BASE64),
            "{\n    \"Credentials\": {\n        \"SecretAccessKey\": \"{}\",\n",
        ),
        sample(
            "aws-session-token",
            format!("IQoJb3JpZ2luX2VjEJr{}=", rand(36, 400, BASE64)),
            "aws_session_token = {}\n",
        ),
        sample(
            "aws-session-token",
            format!("FwoGZXIvYXdzE{}", rand(37, 300, BASE64)),
            "        \"SessionToken\": \"{}\",\n",
        ),
        sample(
            "github-token",
            format!("ghp_{}", rand(12, 36, ALNUM)),
            "GITHUB_TOKEN={} gh pr list",
        ),
        sample(
            "github-token",
            format!("gho_{}", rand(13, 36, ALNUM)),
            "oauth_token: {}",
        ),
        sample(
            "github-token",
            format!("ghu_{}", rand(14, 36, ALNUM)),
            "token {}",
        ),
        sample(
            "github-token",
            format!("ghs_{}", rand(15, 36, ALNUM)),
            "git clone https://x-access-token:{}@github.com/org/repo.git",
        ),
        sample(
            "github-token",
            format!("ghr_{}", rand(16, 76, ALNUM)),
            "refresh_token={}&grant_type=refresh_token",
        ),
        sample(
            "github-token",
            format!(
                "github_pat_11{}_{}",
                rand(17, 20, UPPER_ALNUM),
                rand(18, 59, ALNUM)
            ),
            "Authorization: Bearer {}",
        ),
        sample(
            "gitlab-token",
            format!("glpat-{}", rand(19, 20, BASE64URL)),
            "git remote add origin https://oauth2:{}@gitlab.com/group/project.git",
        ),
        sample(
            "slack-token",
            format!("xoxb-{}-{}", slack_ids(20), rand(21, 24, ALNUM)),
            "SLACK_BOT_TOKEN={}",
        ),
        sample(
            "slack-token",
            format!(
                "xoxp-{}-{}-{}",
                slack_ids(22),
                rand(23, 12, DIGITS),
                rand(24, 32, LOWER_ALNUM)
            ),
            "slack_token: '{}'",
        ),
        sample(
            "slack-token",
            format!("xoxa-2-{}-{}", slack_ids(25), rand(26, 32, LOWER_ALNUM)),
            "{} ",
        ),
        sample(
            "slack-token",
            format!("xoxr-{}", rand(27, 40, ALNUM)),
            "refresh={}",
        ),
        sample(
            "slack-token",
            format!("xoxs-{}-{}", slack_ids(28), rand(29, 40, LOWER_ALNUM)),
            "legacy {}.",
        ),
        sample(
            "slack-webhook",
            format!(
                "https://hooks.slack.com/services/T{}/B{}/{}",
                rand(30, 8, UPPER_ALNUM),
                rand(31, 10, UPPER_ALNUM),
                rand(32, 24, ALNUM)
            ),
            "curl -X POST -d '{\"text\":\"deployed\"}' {}",
        ),
        sample(
            "google-api-key",
            format!("AIzaSy{}", rand(33, 33, BASE64URL)),
            "const firebaseConfig = { apiKey: \"{}\", authDomain: \"app.firebaseapp.com\" };",
        ),
        sample(
            "stripe-key",
            format!("sk_live_51{}", rand(34, 97, ALNUM)),
            "STRIPE_SECRET_KEY={}",
        ),
        sample(
            "stripe-key",
            format!("rk_live_{}", rand(35, 24, ALNUM)),
            "stripe.api_key = \"{}\"",
        ),
        sample(
            "jwt",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
             eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.\
             SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
                .to_string(),
            "Authorization: Bearer {}\n",
        ),
        sample(
            "private-key",
            pem("RSA PRIVATE KEY", 40, "\n"),
            "$ cat ~/.ssh/id_rsa\n{}\n$ ls\n",
        ),
        sample("private-key", pem("OPENSSH PRIVATE KEY", 50, "\n"), "{}\n"),
        sample(
            "private-key",
            pem("EC PRIVATE KEY", 60, "\r\n"),
            "key:\r\n{}\r\n",
        ),
        sample(
            "private-key",
            pem("ENCRYPTED PRIVATE KEY", 70, "\n"),
            "pkcs8: {}",
        ),
        sample("private-key", pem("PGP PRIVATE KEY BLOCK", 80, "\n"), "{}"),
        // Escaped newlines, as in a JSON file printed by `cat`.
        sample(
            "private-key",
            pem("PRIVATE KEY", 90, "\\n"),
            "{\"type\": \"service_account\", \"private_key\": \"{}\\n\", \"client_email\": \"x\"}",
        ),
        // Cut off by `head`: no END line, the base64 lines still go.
        sample(
            "private-key",
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}",
                rand(100, 64, BASE64),
                rand(101, 64, BASE64)
            ),
            "$ head -3 id_rsa\n{}\n$ echo done",
        ),
        sample(
            "url-password",
            format!("{}!{}", rand(110, 20, ALNUM), rand(111, 4, ALNUM)),
            "DATABASE_URL=postgres://app:{}@db.internal:5432/app",
        ),
        with_placeholder(
            sample(
                "url-password",
                "S3cr3tPassw0rd!".to_string(),
                "mysql://root:{}@localhost/shop",
            ),
            "[REDACTED]",
        ),
        with_placeholder(
            sample(
                "url-password",
                "hunter2".to_string(),
                "redis://:{}@cache:6379/0",
            ),
            "***",
        ),
        with_placeholder(
            sample("url-password", "pw".to_string(), "amqp://guest:{}@rabbit//"),
            "**",
        ),
    ]
}

#[test]
fn every_sample_is_replaced_by_its_placeholder_and_nothing_else_changes() {
    let stage = stage::<RedactSecrets>("");
    for s in samples() {
        assert!(s.text.contains(&s.secret));
        let (out, output) = redact_text(&stage, &s.text);
        let expected = s.text.replacen(&s.secret, &s.placeholder, 1);
        assert_eq!(out, expected, "{}: {:?}", s.kind, s.text);
        assert_eq!(output.report.events.len(), 1, "{}", s.kind);
        assert_eq!(output.report.events[0].detail, format!("{}: 1", s.kind));
        assert_eq!(output.report.events[0].kind, "redacted");
        assert!(!output.report.archive_removed);
        assert!(out.len() <= s.text.len(), "{}: never longer", s.kind);
    }
}

#[test]
fn every_built_in_pattern_has_a_sample() {
    let kinds: Vec<&str> = samples().iter().map(|s| s.kind).collect();
    for name in redact_secrets::patterns::builtin_names() {
        assert!(kinds.contains(&name), "no sample for {name}");
    }
}

#[test]
fn all_samples_in_one_text_are_all_replaced() {
    let all: Vec<Sample> = samples();
    let text: String = all.iter().map(|s| format!("{}\n---\n", s.text)).collect();
    let (out, output) = redact_text(&stage::<RedactSecrets>(""), &text);
    for s in &all {
        assert!(!out.contains(&s.secret), "{} left in {out}", s.kind);
    }
    let found: usize = output
        .report
        .events
        .iter()
        .map(|e| {
            e.detail
                .rsplit(": ")
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(found, all.len());
}

#[test]
fn user_pattern_is_applied_and_its_secret_group_limits_the_replacement() {
    let secret = format!("itk_{}", rand(200, 32, LOWER_ALNUM));
    let stage = stage::<RedactSecrets>(
        "patterns = [\n\
         { name = \"internal-token\", regex = \"itk_[a-z0-9]{32}\" },\n\
         { name = \"db-password\", regex = 'db_pass(?:word)?\\s*=\\s*(?P<secret>\\S+)' },\n\
         ]",
    );
    let text = format!("token {secret} and db_password = correct-horse-battery-staple ok");
    let (out, output) = redact_text(&stage, &text);
    assert_eq!(
        out,
        "token [REDACTED:internal-token] and db_password = [REDACTED:db-password] ok"
    );
    let details: Vec<&str> = output
        .report
        .events
        .iter()
        .map(|e| e.detail.as_str())
        .collect();
    assert_eq!(details, vec!["internal-token: 1", "db-password: 1"]);
}

#[test]
fn disabled_built_ins_are_left_alone() {
    let jwt = &samples().into_iter().find(|s| s.kind == "jwt").unwrap();
    let (out, _) = redact_text(&stage::<RedactSecrets>("disable = [\"jwt\"]"), &jwt.text);
    assert_eq!(out, jwt.text);
}
