//! The shell tokenizer behind [`super::shell`]: words with their quotes removed, operators,
//! redirections; here-document bodies, quoted strings and command substitutions (with the
//! here-documents inside them) are consumed whole, so data never reads as commands.
//!
//! ```
//! use condense_eval::probes::shell::writes;
//!
//! // The here-document body is data: its `rm` runs nothing.
//! assert_eq!(writes("cat <<EOF > a.txt\nrm b.txt\nEOF"), ["a.txt"]);
//! ```

/// One word, its quotes removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word(pub(super) String);

impl Word {
    /// Whether the word names one exact path (no glob, variable, substitution or brace).
    pub(super) fn exact(&self) -> bool {
        is_exact(&self.0)
    }
}

fn is_exact(s: &str) -> bool {
    !s.is_empty() && !s.contains(['*', '?', '$', '`', '{', '}'])
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Word(Word),
    /// `;`, `&&`, `||`, `|`, `&`, a newline, `(`, `)`, a group brace.
    Sep,
    /// `>`, `>>`, `>|`, `&>`, `&>>` (optionally after a descriptor): the next word is written.
    Write,
    /// `<`, `<>`, `<<<` (optionally after a descriptor): the next word is not written.
    Other,
    /// `<<`, `<<-`: the next word is the here-document's delimiter.
    HereDoc,
    /// A descriptor duplication (`2>&1`, `>&-`): no file.
    Dup,
}

/// Splits a script into words and operators; here-document bodies are skipped.
pub(super) fn tokenize(script: &str) -> Vec<Tok> {
    let s: Vec<char> = script.chars().collect();
    let mut toks = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    let finish = |toks: &mut Vec<Tok>,
                  word: &mut String,
                  in_word: &mut bool,
                  pending: &mut Vec<(String, bool)>| {
        if *in_word {
            if let Some(Tok::HereDoc) = toks.last() {
                pending.push((word.clone(), false));
            }
            toks.push(Tok::Word(Word(std::mem::take(word))));
            *in_word = false;
        }
    };
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        match c {
            ' ' | '\t' | '\r' => {
                finish(&mut toks, &mut word, &mut in_word, &mut pending);
                i += 1;
            }
            '\n' => {
                finish(&mut toks, &mut word, &mut in_word, &mut pending);
                toks.push(Tok::Sep);
                i += 1;
                for (delim, _) in pending.drain(..) {
                    i = skip_heredoc_body(&s, i, &delim);
                }
            }
            '#' if !in_word => {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            }
            '\\' => {
                if next == Some('\n') {
                    i += 2;
                } else {
                    if let Some(n) = next {
                        word.push(n);
                    }
                    in_word = true;
                    i += 2;
                }
            }
            '\'' => {
                let end = find_char(&s, i + 1, '\'');
                word.extend(&s[i + 1..end]);
                in_word = true;
                i = end + 1;
            }
            '"' => {
                let end = scan_dquote(&s, i + 1);
                word.push_str(&unescape_dquote(&s[i + 1..end.min(s.len())]));
                in_word = true;
                i = end + 1;
            }
            '`' => {
                let end = find_char(&s, i + 1, '`');
                word.extend(&s[i..(end + 1).min(s.len())]);
                in_word = true;
                i = end + 1;
            }
            '$' if next == Some('(') => {
                let end = scan_subst(&s, i + 2);
                word.extend(&s[i..end.min(s.len())]);
                in_word = true;
                i = end;
            }
            '{' | '}' if !in_word && next.is_none_or(|n| n.is_whitespace() || n == ';') => {
                toks.push(Tok::Sep);
                i += 1;
            }
            ';' | '&' | '|' | '(' | ')' | '<' | '>' => {
                // A descriptor number right before a redirection belongs to it.
                let fd = in_word
                    && matches!(c, '<' | '>')
                    && !word.is_empty()
                    && word.chars().all(|d| d.is_ascii_digit());
                if fd {
                    word.clear();
                    in_word = false;
                } else {
                    finish(&mut toks, &mut word, &mut in_word, &mut pending);
                }
                let (tok, len) = operator(&s, i);
                toks.push(tok);
                i += len;
            }
            _ => {
                word.push(c);
                in_word = true;
                i += 1;
            }
        }
    }
    finish(&mut toks, &mut word, &mut in_word, &mut pending);
    toks
}

/// The operator at `s[i]` and its length.
fn operator(s: &[char], i: usize) -> (Tok, usize) {
    let at = |k: usize| s.get(i + k).copied();
    match (s[i], at(1), at(2)) {
        ('&', Some('>'), Some('>')) => (Tok::Write, 3),
        ('&', Some('>'), _) => (Tok::Write, 2),
        ('&' | '|' | ';', Some(n), _) if n == s[i] => (Tok::Sep, 2),
        ('|', Some('&'), _) => (Tok::Sep, 2),
        ('>', Some('>'), _) | ('>', Some('|'), _) => (Tok::Write, 2),
        ('>' | '<', Some('&'), _) => {
            let mut len = 2;
            while s
                .get(i + len)
                .is_some_and(|c| c.is_ascii_digit() || *c == '-')
            {
                len += 1;
            }
            (Tok::Dup, len)
        }
        ('>', _, _) => (Tok::Write, 1),
        ('<', Some('<'), Some('<')) => (Tok::Other, 3),
        ('<', Some('<'), Some('-')) => (Tok::HereDoc, 3),
        ('<', Some('<'), _) => (Tok::HereDoc, 2),
        ('<', Some('>'), _) => (Tok::Other, 2),
        ('<', _, _) => (Tok::Other, 1),
        _ => (Tok::Sep, 1),
    }
}

/// The index of the next `c` from `from` (or the end).
fn find_char(s: &[char], from: usize, c: char) -> usize {
    (from..s.len()).find(|&k| s[k] == c).unwrap_or(s.len())
}

/// From just inside a double quote: the index of the closing quote (or the end).
fn scan_dquote(s: &[char], mut i: usize) -> usize {
    while i < s.len() {
        match s[i] {
            '\\' => i += 2,
            '"' => return i,
            '$' if s.get(i + 1) == Some(&'(') => i = scan_subst(s, i + 2),
            '`' => i = find_char(s, i + 1, '`') + 1,
            _ => i += 1,
        }
    }
    s.len()
}

/// The text of a double-quoted string: `\"`, `\\`, `\$`, `` \` `` unescaped.
fn unescape_dquote(inner: &[char]) -> String {
    let mut out = String::new();
    let mut k = 0;
    while k < inner.len() {
        if inner[k] == '\\' && matches!(inner.get(k + 1), Some('"' | '\\' | '$' | '`')) {
            out.push(inner[k + 1]);
            k += 2;
        } else {
            out.push(inner[k]);
            k += 1;
        }
    }
    out
}

/// From just inside `$(`: the index just past the matching `)` (or the end). Quotes, nested
/// substitutions and here-documents inside are skipped whole.
fn scan_subst(s: &[char], mut i: usize) -> usize {
    let mut depth = 1;
    let mut pending: Vec<String> = Vec::new();
    while i < s.len() {
        match s[i] {
            '\\' => i += 2,
            '\'' => i = find_char(s, i + 1, '\'') + 1,
            '"' => i = scan_dquote(s, i + 1) + 1,
            '(' => {
                depth += 1;
                i += 1;
            }
            ')' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return i;
                }
            }
            '<' if s.get(i + 1) == Some(&'<') && s.get(i + 2) != Some(&'<') => {
                i += 2;
                if s.get(i) == Some(&'-') {
                    i += 1;
                }
                while s.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
                    i += 1;
                }
                let start = i;
                while s
                    .get(i)
                    .is_some_and(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | ')'))
                {
                    i += 1;
                }
                let delim: String = s[start..i]
                    .iter()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect();
                if !delim.is_empty() {
                    pending.push(delim);
                }
            }
            '\n' => {
                i += 1;
                for delim in pending.drain(..) {
                    i = skip_heredoc_body(s, i, &delim);
                }
            }
            _ => i += 1,
        }
    }
    s.len()
}

/// From the start of a line: the index just past the line that closes a here-document.
fn skip_heredoc_body(s: &[char], mut i: usize, delim: &str) -> usize {
    while i < s.len() {
        let end = find_char(s, i, '\n');
        let line: String = s[i..end].iter().collect();
        i = (end + 1).min(s.len());
        if line.trim() == delim {
            break;
        }
    }
    i
}
