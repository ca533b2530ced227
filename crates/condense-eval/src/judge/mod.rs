//! The optional LLM judge: Factory's probe method.
//!
//! For each output, the model is asked four free-form questions about the compressed
//! conversation — *artifact* (which files were created or modified), *recall* (what errors did
//! we hit, with the exact message), *continuation* (the user's last request and what to do
//! next), *decision* (what did we decide and why) — then a second call grades each answer 0-5
//! against a reference made from the ORIGINAL conversation (the probe sets, the last request,
//! the original's last assistant text) and returns `{"score": N, "why": "..."}`.
//!
//! The judge is non-deterministic and costs eight API calls per output; the substring probes
//! are the deterministic measure. Its requests go through the summarizers' own HTTP client,
//! [`condense_summarize::llm::LlmClient`] (Anthropic Messages or OpenAI-compatible Chat
//! Completions, retried twice on 408, 429, 5xx and transport failures): the judge shares the
//! transport with the stages, never the probes (those share no code with the stages'
//! retention). The key is read from the environment variable the user names and is never
//! logged or part of an error.
//!
//! ```
//! use condense_eval::judge::parse_grade;
//!
//! let g = parse_grade("```json\n{\"score\": 4, \"why\": \"one path missing\"}\n```").unwrap();
//! assert_eq!((g.0, g.1.as_str()), (4, "one path missing"));
//! assert!(parse_grade("four out of five").is_err());
//! ```

/// The APIs the judge speaks (`--judge anthropic|openai`): the summarizers'
/// [`ApiKind`](condense_summarize::llm::ApiKind).
pub mod api {
    pub use condense_summarize::llm::ApiKind as Api;
}

use crate::probes::Probes;
use crate::EvalError;
use api::Api;
use condense_model::{Block, Conversation, Role};
use condense_summarize::llm::{LlmClient, LlmConfig, LlmConfigError};
use condense_text::{one_line, prefix_chars};
use serde::Serialize;
use std::fmt::Write;
use std::time::Duration;

/// How many times a failed judge request is sent again (after 1 s, then 2 s).
const RETRIES: u32 = 2;

/// How the judge is reached.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    pub api: Api,
    pub model: String,
    /// The API root; the provider's when `None`.
    pub base_url: Option<String>,
    /// The NAME of the variable holding the key: `ANTHROPIC_API_KEY` by default, and
    /// `OPENAI_API_KEY` with OpenAI's own base URL (none for other OpenAI-compatible servers);
    /// `""` sends no key.
    pub api_key_env: Option<String>,
    /// Per request, in whole seconds (at least one).
    pub timeout: Duration,
}

/// The four questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    Artifact,
    Recall,
    Continuation,
    Decision,
}

impl Question {
    pub const ALL: [Question; 4] = [
        Question::Artifact,
        Question::Recall,
        Question::Continuation,
        Question::Decision,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Question::Artifact => "artifact",
            Question::Recall => "recall",
            Question::Continuation => "continuation",
            Question::Decision => "decision",
        }
    }

    /// What the model is asked.
    pub fn text(self) -> &'static str {
        match self {
            Question::Artifact => {
                "Which files were created, modified or deleted in this session? List every path."
            }
            Question::Recall => {
                "What errors did we hit in this session? Give the exact error message of each."
            }
            Question::Continuation => {
                "What was the user's last request, and what should we do next?"
            }
            Question::Decision => "What did we decide in this session, and why?",
        }
    }
}

/// One graded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grade {
    /// 0 (wrong or missing) to 5 (complete and exact).
    pub score: u8,
    pub why: String,
    pub answer: String,
}

/// The four grades of one output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JudgeScores {
    pub artifact: Grade,
    pub recall: Grade,
    pub continuation: Grade,
    pub decision: Grade,
}

impl JudgeScores {
    /// The scores in [`Question::ALL`] order.
    pub fn scores(&self) -> [u8; 4] {
        [
            self.artifact.score,
            self.recall.score,
            self.continuation.score,
            self.decision.score,
        ]
    }
}

/// What the answers are graded against, taken from the original conversation.
#[derive(Debug, Clone)]
pub struct Reference {
    pub artifacts: Vec<String>,
    pub errors: Vec<String>,
    pub last_request: Option<String>,
    pub last_assistant: Option<String>,
}

impl Reference {
    pub fn new(probes: &Probes, original: &Conversation) -> Reference {
        let last_assistant = original
            .messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.content.text())
            .find(|t| !t.trim().is_empty());
        Reference {
            artifacts: probes.artifacts.clone(),
            errors: probes.errors.clone(),
            last_request: probes.last_request.clone(),
            last_assistant,
        }
    }

    /// The reference text for one question.
    pub fn for_question(&self, q: Question) -> String {
        let list = |title: &str, items: &[String]| {
            let mut s = format!("{title}:\n");
            if items.is_empty() {
                s.push_str("(none)\n");
            }
            for i in items.iter().take(100) {
                let _ = writeln!(s, "- {i}");
            }
            if items.len() > 100 {
                let _ = writeln!(s, "- ... and {} more", items.len() - 100);
            }
            s
        };
        let request = format!(
            "The user's last request:\n{}\n",
            self.last_request.as_deref().unwrap_or("(none)")
        );
        let last = format!(
            "The agent's last message in the original session:\n{}\n",
            self.last_assistant
                .as_deref()
                .map_or("(none)".to_string(), |t| prefix_chars(t, 4000).to_string())
        );
        match q {
            Question::Artifact => list(
                "Files written (created, edited, moved or deleted)",
                &self.artifacts,
            ),
            Question::Recall => list(
                "Errors hit (the first meaningful line of each)",
                &self.errors,
            ),
            Question::Continuation => format!("{request}\n{last}"),
            Question::Decision => format!(
                "{last}\n{request}\n{}",
                list("Files written", &self.artifacts)
            ),
        }
    }
}

const ANSWER_SYSTEM: &str = "You are an AI coding agent resuming an earlier session. All you have \
is the session's transcript, which may have been compressed. Answer the question from the \
transcript alone, precisely and briefly; quote file paths and error messages exactly. If the \
transcript does not say, answer \"not in the transcript\".";

const GRADE_SYSTEM: &str = "You grade an AI agent's answer about a session it resumed from a \
compressed transcript, against a reference taken from the original, uncompressed session. \
Score 0-5: 5 complete and exact (paths and messages as in the reference), 4 minor omissions, \
3 about half, 2 a little, 1 barely related, 0 wrong or \"not in the transcript\" when the \
reference has the facts. Reply with JSON only: {\"score\": N, \"why\": \"one sentence\"}.";

/// A configured judge.
#[derive(Debug)]
pub struct Judge {
    client: LlmClient,
}

impl Judge {
    /// Checks the config and reads the key with `env` (`std::env::var` in the binary).
    pub fn new(
        config: &JudgeConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Judge, EvalError> {
        let llm = LlmConfig {
            model: Some(config.model.clone()),
            base_url: config.base_url.clone(),
            api_key_env: config.api_key_env.clone(),
            timeout_secs: config.timeout.as_secs().max(1),
            max_retries: RETRIES,
            ..LlmConfig::default()
        };
        // The client's checks, worded with the judge's flags.
        let client = LlmClient::new(config.api, &llm, env).map_err(|e| {
            EvalError::JudgeConfig(match e {
                LlmConfigError::NoModel => {
                    "--judge-model is required (the model name the API expects)".into()
                }
                LlmConfigError::BadBaseUrl(raw) => format!(
                    "--judge-base-url {raw:?} is not an http:// or https:// URL with a host"
                ),
                LlmConfigError::KeyNotSet(name) => format!(
                    "environment variable {name} is not set; it must hold the API key \
                     (--judge-api-key-env names another variable)"
                ),
                other => other.to_string(),
            })
        })?;
        Ok(Judge { client })
    }

    /// Which API the judge speaks.
    pub fn api(&self) -> Api {
        self.client.kind()
    }

    /// Asks the four questions about `compressed` and grades the answers against `reference`.
    pub fn judge(
        &self,
        compressed: &Conversation,
        reference: &Reference,
    ) -> Result<JudgeScores, EvalError> {
        let transcript = transcript(compressed);
        let mut grades = Vec::new();
        for q in Question::ALL {
            let answer = self.send(
                ANSWER_SYSTEM,
                &format!(
                    "<transcript>\n{transcript}\n</transcript>\n\nQuestion: {}",
                    q.text()
                ),
                1024,
            )?;
            let reply = self.send(
                GRADE_SYSTEM,
                &format!(
                    "Question: {}\n\nReference (from the original session):\n{}\nAnswer to grade:\n{answer}",
                    q.text(),
                    reference.for_question(q)
                ),
                300,
            )?;
            let (score, why) = parse_grade(&reply).map_err(|message| EvalError::Judge {
                api: self.api().name(),
                message: format!("grading the {} answer: {message}", q.name()),
            })?;
            grades.push(Grade { score, why, answer });
        }
        let mut it = grades.into_iter();
        let mut next = || {
            it.next().unwrap_or(Grade {
                score: 0,
                why: String::new(),
                answer: String::new(),
            })
        };
        Ok(JudgeScores {
            artifact: next(),
            recall: next(),
            continuation: next(),
            decision: next(),
        })
    }

    /// One request through the client; a failure names the API.
    fn send(&self, system: &str, user: &str, max_tokens: usize) -> Result<String, EvalError> {
        self.client
            .send(system, user, max_tokens)
            .map_err(|e| EvalError::Judge {
                api: self.api().name(),
                message: e.to_string(),
            })
    }
}

/// The grading reply's `{"score": N, "why": "..."}` (inside a code fence or prose is fine).
pub fn parse_grade(reply: &str) -> Result<(u8, String), String> {
    let one_line = one_line(reply);
    let shown = || prefix_chars(&one_line, 120).to_string();
    let bad = || {
        format!(
            "the reply is not {{\"score\": N, \"why\": \"...\"}}: {:?}",
            shown()
        )
    };
    let (start, end) = match (reply.find('{'), reply.rfind('}')) {
        (Some(s), Some(e)) if s < e => (s, e),
        _ => return Err(bad()),
    };
    let v: serde_json::Value = serde_json::from_str(&reply[start..=end]).map_err(|_| bad())?;
    let score = v
        .get("score")
        .and_then(|s| s.as_f64())
        .filter(|s| (0.0..=5.0).contains(s))
        .ok_or_else(bad)?;
    let why = v
        .get("why")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((score.round() as u8, why))
}

/// The compressed conversation as the judge reads it: one paragraph per block, with roles.
pub fn transcript(conv: &Conversation) -> String {
    let mut out = String::new();
    if let Some(system) = &conv.system {
        let _ = write!(out, "[system]\n{}\n\n", system.text());
    }
    for m in conv.chat_messages() {
        for b in &m.content.blocks {
            match b {
                Block::Text(t) => {
                    let _ = write!(out, "[{}]\n{}\n\n", m.role.as_str(), t.text);
                }
                Block::ToolUse(tu) => {
                    let _ = write!(out, "[tool call {}]\n{}\n\n", tu.name, tu.input);
                }
                Block::ToolResult(tr) => {
                    let _ = write!(out, "[tool result]\n{}\n\n", tr.content.text());
                }
                _ => {}
            }
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grades_parse_or_fail_clearly() {
        assert_eq!(
            parse_grade(r#"{"score": 5, "why": "all there"}"#).unwrap(),
            (5, "all there".to_string())
        );
        assert_eq!(parse_grade(r#"Sure: {"score": 2.6}"#).unwrap().0, 3);
        let e = parse_grade(r#"{"score": 9, "why": "x"}"#).unwrap_err();
        assert!(e.contains("not {\"score\""), "{e}");
        assert!(parse_grade("}{").is_err());
    }

    #[test]
    fn missing_key_is_a_config_error() {
        let config = JudgeConfig {
            api: Api::Anthropic,
            model: "m".into(),
            base_url: Some("http://127.0.0.1:1".into()),
            api_key_env: Some("NO_SUCH_VAR".into()),
            timeout: Duration::from_secs(1),
        };
        let e = Judge::new(&config, &|_| None).unwrap_err();
        assert!(e.is_config_error());
        assert!(e.to_string().contains("NO_SUCH_VAR is not set"), "{e}");
        // A local OpenAI-compatible server needs no key.
        let open = JudgeConfig {
            api: Api::OpenAi,
            api_key_env: None,
            ..config
        };
        assert!(Judge::new(&open, &|_| None).is_ok());
    }

    #[test]
    fn references_come_from_the_original() {
        let probes = Probes {
            artifacts: vec!["src/a.rs".into()],
            errors: vec![],
            last_request: Some("ship".into()),
        };
        let mut conv = Conversation::default();
        conv.messages.push(condense_model::Message::new(
            "a",
            Role::Assistant,
            vec![Block::text("We chose X because Y.")],
        ));
        let r = Reference::new(&probes, &conv);
        assert!(r.for_question(Question::Artifact).contains("- src/a.rs"));
        assert!(r.for_question(Question::Recall).contains("(none)"));
        let c = r.for_question(Question::Continuation);
        assert!(
            c.contains("ship") && c.contains("We chose X because Y."),
            "{c}"
        );
    }
}
