//! The pipeline file's TOML mistakes, said as the mistake the author made.
//!
//! The toml parser reports what it saw, not what went wrong: a second stage written `[stage]`
//! instead of `[[stage]]`, or a stage's `[stage.config]` with no `[[stage]]` line before it,
//! both read `duplicate key`; `[[stages]]` reads `unknown field`. This module looks at the
//! line the error points to and says which header or key is the problem, where the first one
//! is, and what to write instead.

/// `message` (the toml error at byte `offset` of `text`) as the author's mistake.
pub(super) fn explain(text: &str, offset: usize, message: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = text[..offset.min(text.len())].matches('\n').count();
    let line = lines.get(at).map_or("", |l| l.trim());
    let header = parse_header(line);

    if message.starts_with("duplicate key") {
        if let Some((name, double)) = header {
            return duplicate_header(&lines[..at], name, double);
        }
        if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            // The first one: the same key earlier in this table (after the last header).
            let first = lines[..at]
                .iter()
                .enumerate()
                .rev()
                .take_while(|(_, l)| parse_header(l.trim()).is_none())
                .find(|(_, l)| l.split_once('=').is_some_and(|(k, _)| k.trim() == key))
                .map(|(i, _)| i + 1);
            return match first {
                Some(n) => format!("duplicate key `{key}` (first set on line {n})"),
                None => format!("duplicate key `{key}`"),
            };
        }
    }
    if let Some((name, double)) = header {
        if double && message.contains("expected a map") {
            return format!(
                "`[[{name}]]` makes a list of tables, but `{name}` is one table: write `[{name}]`"
            );
        }
        if !double && message.contains("expected a sequence") {
            return format!(
                "`[{name}]` makes one table, but `{name}` is a list of tables: write `[[{name}]]` (one per stage)"
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once("`, expected one of ") {
            let known: Vec<&str> = expected.split(", ").map(|k| k.trim_matches('`')).collect();
            if let Some(close) = known.iter().find(|k| similar(field, k)) {
                return format!("{message}; did you mean `{close}`?");
            }
        }
    }
    message.to_string()
}

/// `[name]` -> (name, false), `[[name]]` -> (name, true).
fn parse_header(line: &str) -> Option<(&str, bool)> {
    let line = line.split('#').next().unwrap_or("").trim();
    if let Some(inner) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
        return Some((inner.trim(), true));
    }
    line.strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .map(|inner| (inner.trim(), false))
}

fn duplicate_header(before: &[&str], name: &str, double: bool) -> String {
    let earlier = |want_double: bool| {
        before
            .iter()
            .rposition(|l| parse_header(l.trim()) == Some((name, want_double)))
            .map(|i| i + 1)
    };
    let parent = name.rsplit_once('.').map(|(p, _)| p);
    match (double, earlier(true), earlier(false)) {
        (false, Some(n), _) => format!(
            "`[{name}]` here, but line {n} starts a list with `[[{name}]]`: write `[[{name}]]` (two brackets) for every entry"
        ),
        (false, None, Some(n)) => match parent {
            Some(parent) => format!(
                "a second `[{name}]` in the same `[[{parent}]]` (the first is on line {n}): start each entry with its own `[[{parent}]]` line"
            ),
            None => format!("table `[{name}]` is written twice (first on line {n})"),
        },
        (true, _, Some(n)) => format!(
            "`[[{name}]]` here, but line {n} made `[{name}]` one table: use one form"
        ),
        _ => format!("`[{name}]` is defined twice"),
    }
}

/// A likely misspelling: one edit apart, or one is the other with an `s`.
fn similar(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) || a.trim_end_matches('s') == b.trim_end_matches('s') {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()] <= 2 && a.len() > 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_line(text: &str, line: usize, message: &str) -> String {
        let offset: usize = text.lines().take(line - 1).map(|l| l.len() + 1).sum();
        explain(text, offset, message)
    }

    #[test]
    fn duplicate_keys_become_the_mistake() {
        let text = "[[stage]]\nplugin = \"a\"\n[stage.config]\nx = 1\n[stage.config]\ny = 2\n";
        assert_eq!(
            at_line(text, 5, "duplicate key"),
            "a second `[stage.config]` in the same `[[stage]]` (the first is on line 3): start each entry with its own `[[stage]]` line"
        );
        let text = "[[stage]]\nplugin = \"a\"\n[stage]\nplugin = \"b\"\n";
        assert_eq!(
            at_line(text, 3, "duplicate key"),
            "`[stage]` here, but line 1 starts a list with `[[stage]]`: write `[[stage]]` (two brackets) for every entry"
        );
        let text = "[[stage]]\nplugin = \"a\"\nname = \"x\"\nplugin = \"b\"\n";
        assert_eq!(
            at_line(text, 4, "duplicate key"),
            "duplicate key `plugin` (first set on line 2)"
        );
    }

    #[test]
    fn wrong_brackets_and_misspellings() {
        assert_eq!(
            at_line("[stage]\nplugin = \"a\"\n", 1, "invalid type: map, expected a sequence"),
            "`[stage]` makes one table, but `stage` is a list of tables: write `[[stage]]` (one per stage)"
        );
        let text = "[[stage]]\nplugin = \"a\"\n[[stage.config]]\n";
        assert_eq!(
            at_line(text, 3, "invalid type: sequence, expected a map"),
            "`[[stage.config]]` makes a list of tables, but `stage.config` is one table: write `[stage.config]`"
        );
        let m = "unknown field `stages`, expected one of `model`, `store`, `plugins`, `summarizer`, `stage`";
        assert_eq!(
            at_line("[[stages]]\n", 1, m),
            format!("{m}; did you mean `stage`?")
        );
        let m = "unknown field `colour`, expected one of `model`, `stage`";
        assert_eq!(at_line("colour = 1\n", 1, m), m);
    }
}
