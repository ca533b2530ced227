//! The pipeline file: which stages run, in which order, with which config.
//!
//! ```toml
//! [model]
//! context_window = 200000
//! max_output_tokens = 32000
//! fixed_tokens = 0             # system prompt + tool definitions the file does not hold
//! tokenizer = "o200k_base"
//!
//! [store]
//! directory = ".condense"      # relative to the pipeline file; default: beside the input
//!
//! [plugins]
//! dirs = ["./my-plugins"]      # searched first, relative to the pipeline file
//!
//! [[stage]]
//! name = "budget"              # unique; defaults to the plugin name
//! plugin = "tool-result-budget" # a plugin name, or a path to a library
//! enabled = true
//! on_error = "fail"            # or "skip": continue unchanged past a failing stage
//! [stage.config]               # handed to the plugin, which validates it
//! max_result_size_chars = 50000
//! ```

use condense_budget::BudgetConfig;
use condense_summarize::SummarizerConfig;
use condense_tokens::TokenizerKind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use toml::Spanned;

mod locations;
mod toml_errors;

use locations::key_value_offset;
pub use locations::ConfigLocations;

/// The default pipeline, embedded in the binary.
pub const DEFAULT_PIPELINE: &str = include_str!("default_pipeline.toml");

/// A pipeline file problem: `file:line:column: message`.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct PipelineError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPipeline {
    #[serde(default)]
    model: ModelSection,
    #[serde(default)]
    store: StoreSection,
    #[serde(default)]
    plugins: PluginsSection,
    #[serde(default)]
    summarizer: SummarizerConfig,
    #[serde(default)]
    stage: Vec<RawStage>,
    /// `[serve]`: the proxy's settings (`condense serve`), read by condense-serve.
    #[serde(default)]
    serve: toml::Table,
}

/// `[model]`: every key optional, defaults from [`BudgetConfig`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelSection {
    context_window: Option<usize>,
    max_output_tokens: Option<usize>,
    fixed_tokens: Option<usize>,
    output_reserve: Option<usize>,
    summary_output_cap: Option<usize>,
    autocompact_buffer: Option<usize>,
    warning_pct: Option<f64>,
    critical_pct: Option<f64>,
    normal_below_pct: Option<f64>,
    tokenizer: Option<TokenizerKind>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreSection {
    directory: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginsSection {
    #[serde(default)]
    dirs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    name: Option<Spanned<String>>,
    plugin: Spanned<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    on_error: OnError,
    #[serde(default)]
    config: Option<Spanned<toml::Table>>,
}

fn yes() -> bool {
    true
}

/// What to do when a stage fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Stop with an error (the default).
    #[default]
    Fail,
    /// Carry on with the conversation as it was before the stage; the report says so.
    Skip,
}

/// One `[[stage]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSpec {
    pub name: String,
    /// A plugin name or a path to a library (resolved against the pipeline file's folder).
    pub plugin: String,
    pub enabled: bool,
    pub on_error: OnError,
    pub config: toml::Table,
    /// Where each config key's value was written, for errors about it.
    #[serde(skip)]
    pub config_at: ConfigLocations,
}

/// A parsed, validated pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Where it came from (`<default>` for the embedded one).
    pub source: String,
    /// The folder relative paths in the file are resolved against.
    pub base_dir: Option<PathBuf>,
    pub budget: BudgetConfig,
    pub tokenizer: TokenizerKind,
    pub store_dir: Option<PathBuf>,
    pub plugin_dirs: Vec<PathBuf>,
    /// The `[summarizer]` stages call through the host (default: offline extractive).
    pub summarizer: SummarizerConfig,
    pub stages: Vec<StageSpec>,
    /// The `[serve]` table as written (empty when absent): `condense serve` validates it.
    pub serve: toml::Table,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl Pipeline {
    /// The embedded default pipeline.
    pub fn default_pipeline() -> Pipeline {
        // The embedded file is checked by a unit test, so parsing it cannot fail at run time;
        // should it ever, an empty pipeline is the safe fallback.
        Pipeline::parse(DEFAULT_PIPELINE, "<default>", None).unwrap_or_else(|_| Pipeline {
            source: "<default>".into(),
            base_dir: None,
            budget: BudgetConfig::default(),
            tokenizer: TokenizerKind::default(),
            store_dir: None,
            plugin_dirs: Vec::new(),
            summarizer: SummarizerConfig::default(),
            stages: Vec::new(),
            serve: toml::Table::new(),
        })
    }

    /// Reads and parses a pipeline file.
    pub fn from_file(path: &Path) -> Result<Pipeline, PipelineError> {
        let text = std::fs::read_to_string(path).map_err(|e| PipelineError {
            file: path.display().to_string(),
            line: 0,
            column: 0,
            message: format!("cannot read pipeline file: {e}"),
        })?;
        let base = path.parent().map(Path::to_path_buf);
        Pipeline::parse(&text, &path.display().to_string(), base)
    }

    /// Parses pipeline TOML. `source` names it in errors.
    pub fn parse(
        text: &str,
        source: &str,
        base_dir: Option<PathBuf>,
    ) -> Result<Pipeline, PipelineError> {
        let err_at = |offset: usize, message: String| {
            let (line, column) = line_col(text, offset);
            PipelineError {
                file: source.to_string(),
                line,
                column,
                // Messages quote the file's values, which may hold line breaks: an error is
                // one line, so control characters are shown escaped.
                message: message
                    .chars()
                    .flat_map(|c| {
                        let escaped = c.is_control().then(|| c.escape_default());
                        let plain = (!c.is_control()).then_some(c);
                        escaped.into_iter().flatten().chain(plain)
                    })
                    .collect(),
            }
        };
        let raw: RawPipeline = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            err_at(
                offset,
                toml_errors::explain(text, offset, e.message().trim()),
            )
        })?;

        let defaults = BudgetConfig::default();
        let m = raw.model;
        let budget = BudgetConfig {
            context_window: m.context_window.unwrap_or(defaults.context_window),
            max_output_tokens: m.max_output_tokens.unwrap_or(defaults.max_output_tokens),
            fixed_tokens: m.fixed_tokens.unwrap_or(defaults.fixed_tokens),
            output_reserve: m.output_reserve.unwrap_or(defaults.output_reserve),
            summary_output_cap: m.summary_output_cap.unwrap_or(defaults.summary_output_cap),
            autocompact_buffer: m.autocompact_buffer.unwrap_or(defaults.autocompact_buffer),
            warning_pct: m.warning_pct.unwrap_or(defaults.warning_pct),
            critical_pct: m.critical_pct.unwrap_or(defaults.critical_pct),
            normal_below_pct: m.normal_below_pct.unwrap_or(defaults.normal_below_pct),
        };
        budget.validate().map_err(|e| {
            let offset = text.find("[model]").unwrap_or(0);
            err_at(offset, format!("[model]: {e}"))
        })?;

        let mut stages: Vec<StageSpec> = Vec::new();
        let mut seen: Vec<(String, usize)> = Vec::new();
        for raw_stage in raw.stage {
            let plugin = raw_stage.plugin.get_ref().trim().to_string();
            if plugin.is_empty() {
                return Err(err_at(
                    raw_stage.plugin.span().start,
                    "stage `plugin` is empty".into(),
                ));
            }
            let (name, offset) = match &raw_stage.name {
                Some(n) => (n.get_ref().clone(), n.span().start),
                None => (plugin_display_name(&plugin), raw_stage.plugin.span().start),
            };
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                let (line, _) = line_col(text, *first);
                return Err(err_at(
                    offset,
                    format!("duplicate stage name `{name}` (first used on line {line}); give each [[stage]] a unique `name`"),
                ));
            }
            seen.push((name.clone(), offset));
            let stage_at = line_col(text, raw_stage.plugin.span().start);
            let (config, config_at) = match raw_stage.config {
                Some(c) => {
                    let span = c.span();
                    let table = c.into_inner();
                    let keys = table
                        .keys()
                        .filter_map(|k| {
                            let at = key_value_offset(text, span.clone(), k)?;
                            let (line, column) = line_col(text, at);
                            Some((k.clone(), line, column))
                        })
                        .collect();
                    (
                        table,
                        ConfigLocations {
                            stage: stage_at,
                            keys,
                        },
                    )
                }
                None => (
                    toml::Table::new(),
                    ConfigLocations {
                        stage: stage_at,
                        keys: Vec::new(),
                    },
                ),
            };
            stages.push(StageSpec {
                name,
                plugin,
                enabled: raw_stage.enabled,
                on_error: raw_stage.on_error,
                config,
                config_at,
            });
        }

        let resolve = |p: PathBuf| match &base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p,
        };
        Ok(Pipeline {
            source: source.to_string(),
            base_dir: base_dir.clone(),
            budget,
            tokenizer: m.tokenizer.unwrap_or_default(),
            store_dir: raw.store.directory.map(resolve),
            plugin_dirs: raw.plugins.dirs.into_iter().map(resolve).collect(),
            summarizer: raw.summarizer,
            stages,
            serve: raw.serve,
        })
    }

    /// A stage's config error (the plugin's one-line message) with the `file:line:column` of
    /// the key it names (`` `[stage.config] KEY` ``, as `condense_abi::parse_config` writes
    /// it), else of the stage's `plugin` line.
    pub fn locate_config_error(&self, stage: &StageSpec, message: &str) -> String {
        let key = message
            .split_once("`[stage.config] ")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map(|(key, _)| key);
        // Already located (by the host's loader, then again by a caller): leave it.
        if message.starts_with(&format!("{}:", self.source)) {
            return message.to_string();
        }
        let at = &stage.config_at;
        let (line, column) = key
            .and_then(|k| at.keys.iter().find(|(name, _, _)| name == k))
            .map_or(at.stage, |(_, line, column)| (*line, *column));
        if line == 0 {
            return message.to_string();
        }
        format!("{}:{line}:{column}: {message}", self.source)
    }

    /// Problems worth a warning that do not stop a run, one line each. Today: a secret
    /// redacting stage after stages that change the conversation, whose originals (secrets
    /// included) the host archives in the store's records/ before the redaction runs.
    pub fn warnings(&self) -> Vec<String> {
        let enabled: Vec<&StageSpec> = self.stages.iter().filter(|s| s.enabled).collect();
        let Some(first_redact) = enabled.iter().position(|s| is_redactor(&s.plugin)) else {
            return Vec::new();
        };
        let before: Vec<&str> = enabled[..first_redact]
            .iter()
            .filter(|s| !is_redactor(&s.plugin))
            .map(|s| s.name.as_str())
            .collect();
        if before.is_empty() {
            return Vec::new();
        }
        let order: Vec<String> = enabled.iter().map(|s| format!("`{}`", s.name)).collect();
        vec![format!(
            "{}: `{}` redacts secrets after {} (stage order {}): the originals those stages change, secrets included, are archived in the store's records/; put it first",
            self.source,
            enabled[first_redact].name,
            before
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            order.join(" → ")
        )]
    }

    /// The effective pipeline as TOML (what `condense pipeline show` prints). An error when a
    /// value has no TOML form, rather than printing an empty pipeline.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            model: ModelOut<'a>,
            #[serde(skip_serializing_if = "Option::is_none")]
            store: Option<StoreOut<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            plugins: Option<PluginsOut<'a>>,
            summarizer: &'a SummarizerConfig,
            // `condense serve`'s settings, as written (validated by condense-serve).
            #[serde(skip_serializing_if = "toml::Table::is_empty")]
            serve: &'a toml::Table,
            stage: &'a [StageSpec],
        }
        #[derive(Serialize)]
        struct ModelOut<'a> {
            #[serde(flatten)]
            budget: &'a BudgetConfig,
            tokenizer: String,
        }
        #[derive(Serialize)]
        struct StoreOut<'a> {
            directory: &'a Path,
        }
        #[derive(Serialize)]
        struct PluginsOut<'a> {
            dirs: &'a [PathBuf],
        }
        let out = Out {
            model: ModelOut {
                budget: &self.budget,
                tokenizer: self.tokenizer.to_string(),
            },
            store: self
                .store_dir
                .as_deref()
                .map(|directory| StoreOut { directory }),
            plugins: (!self.plugin_dirs.is_empty()).then_some(PluginsOut {
                dirs: &self.plugin_dirs,
            }),
            summarizer: &self.summarizer,
            serve: &self.serve,
            stage: &self.stages,
        };
        let body = toml::to_string_pretty(&out)?;
        // The one [model] key a user must set by hand for some formats: say what it is for.
        let body = body.replacen(
            "\nfixed_tokens = ",
            "\n# the system prompt + tool definitions the file does not hold (a Claude Code \
             session):\n# `condense stats` shows the gap to the usage the session reported\n\
             fixed_tokens = ",
            1,
        );
        Ok(format!(
            "# effective pipeline (from {})\n{body}",
            self.source
        ))
    }
}

/// Whether a stage's plugin is the secret redactor (by name or library file name), whose
/// place in the order matters: see [`Pipeline::warnings`].
fn is_redactor(plugin: &str) -> bool {
    plugin_display_name(plugin) == "redact-secrets"
}

/// A stage's default name: the plugin name, or a library path's file stem.
fn plugin_display_name(plugin: &str) -> String {
    if crate::discover::looks_like_path(plugin) {
        Path::new(plugin)
            .file_stem()
            .map(|s| {
                s.to_string_lossy()
                    .trim_start_matches("lib")
                    .replace('_', "-")
            })
            .unwrap_or_else(|| plugin.to_string())
    } else {
        plugin.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        Pipeline::parse(text, "p.toml", None)
    }

    #[test]
    fn embedded_default_parses() {
        let p = parse(DEFAULT_PIPELINE).unwrap();
        let plugins: Vec<&str> = p.stages.iter().map(|s| s.plugin.as_str()).collect();
        assert_eq!(
            plugins,
            [
                "tool-result-budget",
                "snip",
                "microcompact",
                "context-collapse",
                "autocompact"
            ]
        );
        assert_eq!(p.budget.context_window, 200_000);
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = parse(
            "[model]\ncontext_window = 1000\n\n[[stage]]\nplugin = \"snip\"\nenabeld = false\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (6, 1), "{e}");
        assert!(
            e.to_string()
                .starts_with("p.toml:6:1: unknown field `enabeld`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_names_line_and_column() {
        let e = parse("[model]\ncontext_window = \"big\"\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("invalid type"), "{e}");
    }

    #[test]
    fn duplicate_stage_names_are_refused() {
        let text = "[[stage]]\nplugin = \"a\"\n[[stage]]\nname = \"b\"\nplugin = \"x\"\n[[stage]]\nname = \"a\"\nplugin = \"y\"\n";
        let e = parse(text).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(
            e.message
                .contains("duplicate stage name `a` (first used on line 2)"),
            "{e}"
        );
    }

    #[test]
    fn same_plugin_twice_with_different_names_is_fine() {
        let text = "[[stage]]\nname = \"a\"\nplugin = \"p\"\n[[stage]]\nname = \"b\"\nplugin = \"p\"\non_error = \"skip\"\n[stage.config]\nk = 1\n";
        let p = parse(text).unwrap();
        assert_eq!(p.stages.len(), 2);
        assert_eq!(p.stages[1].on_error, OnError::Skip);
        assert_eq!(
            p.stages[1].config.get("k").and_then(|v| v.as_integer()),
            Some(1)
        );
    }

    #[test]
    fn bad_on_error_and_bad_budget_are_refused() {
        let e = parse("[[stage]]\nplugin = \"p\"\non_error = \"ignore\"\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse("[model]\ncontext_window = 0\n").unwrap_err();
        assert!(e.message.starts_with("[model]:"), "{e}");
    }

    #[test]
    fn show_round_trips() {
        let p = parse(DEFAULT_PIPELINE).unwrap();
        let again = parse(&p.to_toml().unwrap()).unwrap();
        assert_eq!(p.stages, again.stages);
        assert_eq!(p.budget, again.budget);
    }

    #[test]
    fn show_keeps_the_serve_table() {
        let text = "[serve]\non_error = \"fail\"\n[serve.models]\n\"my-model\" = 64000\n\n[[stage]]\nplugin = \"p\"\n";
        let p = parse(text).unwrap();
        let shown = p.to_toml().unwrap();
        let again = parse(&shown).unwrap();
        assert_eq!(again.serve, p.serve, "{shown}");
        assert_eq!(again.stages, p.stages);
        // Without one, `pipeline show` prints no empty [serve] table.
        assert!(!parse(DEFAULT_PIPELINE)
            .unwrap()
            .to_toml()
            .unwrap()
            .contains("[serve]"));
    }

    #[test]
    fn config_errors_point_at_the_key() {
        let text = "[[stage]]\nname = \"a\"\nplugin = \"p\"\n\n[stage.config]\nother = 1\nkeep_recent = \"x\"\n[[stage]]\nplugin = \"q\"\nconfig = { \"n\" = 2, keep_recent = 1 }\n";
        let p = parse(text).unwrap();
        let m =
            "snip: `[stage.config] keep_recent` must be a whole number (0 or more), found \"x\"";
        assert_eq!(
            p.locate_config_error(&p.stages[0], m),
            format!("p.toml:7:15: {m}")
        );
        // Inline tables and quoted keys; a message naming no key points at the stage.
        let m2 = "q: `[stage.config] keep_recent` must be true or false, found 1";
        assert_eq!(
            p.locate_config_error(&p.stages[1], m2),
            format!("p.toml:10:35: {m2}")
        );
        assert_eq!(p.stages[1].config_at.keys[0], ("n".to_string(), 10, 18));
        assert_eq!(
            p.locate_config_error(&p.stages[1], "q: bad"),
            "p.toml:9:10: q: bad"
        );
        assert_eq!(
            p.locate_config_error(&p.stages[1], "p.toml:9:10: q: bad"),
            "p.toml:9:10: q: bad"
        );
    }

    #[test]
    fn toml_mistakes_are_named() {
        let e = parse("[[stage]]\nplugin = \"a\"\n[stage.config]\nx = 1\n[stage.config]\ny = 2\n")
            .unwrap_err();
        assert!(
            e.to_string().starts_with("p.toml:5:")
                && e.message.contains("a second `[stage.config]`"),
            "{e}"
        );
        let e = parse("[[stages]]\nplugin = \"a\"\n").unwrap_err();
        assert!(e.message.ends_with("did you mean `stage`?"), "{e}");
        let e = parse("[[stage]]\nplugin = \"a\"\n[stage]\nplugin = \"b\"\n").unwrap_err();
        assert!(e.message.contains("write `[[stage]]`"), "{e}");
    }

    #[test]
    fn redacting_after_archiving_stages_is_a_warning() {
        let p = parse("[[stage]]\nplugin = \"redact-secrets\"\n[[stage]]\nplugin = \"snip\"\n")
            .unwrap();
        assert!(p.warnings().is_empty());
        let text = "[[stage]]\nplugin = \"snip\"\n[[stage]]\nname = \"off\"\nplugin = \"microcompact\"\nenabled = false\n[[stage]]\nname = \"redact\"\nplugin = \"./lib/libredact_secrets.so\"\n";
        let w = parse(text).unwrap().warnings();
        assert_eq!(
            w,
            ["p.toml: `redact` redacts secrets after `snip` (stage order `snip` → `redact`): the originals those stages change, secrets included, are archived in the store's records/; put it first"]
        );
    }

    #[test]
    fn fixed_tokens_are_read_shown_and_checked() {
        let p = parse("[model]\nfixed_tokens = 16500\n").unwrap();
        assert_eq!(p.budget.fixed_tokens, 16_500);
        let shown = p.to_toml().unwrap();
        assert!(shown.contains("fixed_tokens = 16500"), "{shown}");
        assert_eq!(parse(&shown).unwrap().budget, p.budget);
        let e = parse(
            "[model]\ncontext_window = 20000\nmax_output_tokens = 2000\nfixed_tokens = 19000\n",
        )
        .unwrap_err();
        assert!(e.message.contains("fixed_tokens (19000)"), "{e}");
    }

    #[test]
    fn errors_quoting_a_multi_line_value_stay_on_one_line() {
        let e = parse("[summarizer]\nkind = \"\"\"multi\nline\"\"\"\n").unwrap_err();
        let shown = e.to_string();
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.contains("multi\\nline"), "{shown}");
    }
}
