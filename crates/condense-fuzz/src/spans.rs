//! Where the JSON values of a text are, as byte spans of the text itself, so mutations can
//! rewrite one value (a number, a string, an array's elements) and keep every other byte as
//! it was. A tolerant scanner, not a validator: a text it cannot follow gives fewer spans.

/// What a span holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    /// `true`, `false`, `null`.
    Literal,
}

/// One value: `text[start..end]`; for arrays the elements' spans, for objects the members'
/// (from the key's opening quote to the end of the value).
#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub children: Vec<(usize, usize)>,
    /// An object member's key span (objects only, same order as `children`).
    pub keys: Vec<(usize, usize)>,
}

/// Deeper than this the scanner stops: a mutated input may nest without limit.
const MAX_DEPTH: usize = 200;

/// Every value of `text`: the whole text as one JSON value when it is one, else each line
/// that is (JSONL).
pub fn scan(text: &[u8]) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut s = Scanner {
        text,
        pos: 0,
        nodes: &mut nodes,
    };
    s.ws();
    if s.value(0).is_some() {
        s.ws();
        if s.pos == text.len() {
            return nodes;
        }
    }
    nodes.clear();
    let mut line_start = 0;
    while line_start < text.len() {
        let line_end = text[line_start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| line_start + p);
        let before = nodes.len();
        let mut s = Scanner {
            text: &text[..line_end],
            pos: line_start,
            nodes: &mut nodes,
        };
        s.ws();
        let whole = s.value(0).is_some() && {
            s.ws();
            s.pos == line_end
        };
        if !whole {
            nodes.truncate(before);
        }
        line_start = line_end + 1;
    }
    nodes
}

struct Scanner<'a, 'n> {
    text: &'a [u8],
    pos: usize,
    nodes: &'n mut Vec<Node>,
}

impl Scanner<'_, '_> {
    fn ws(&mut self) {
        while self
            .text
            .get(self.pos)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.text.get(self.pos) == Some(&b)).then(|| self.pos += 1)
    }

    fn push(&mut self, kind: Kind, start: usize) -> usize {
        self.nodes.push(Node {
            kind,
            start,
            end: start,
            children: Vec::new(),
            keys: Vec::new(),
        });
        self.nodes.len() - 1
    }

    /// One value at `pos`; returns its span.
    fn value(&mut self, depth: usize) -> Option<(usize, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        match *self.text.get(self.pos)? {
            b'{' => {
                let idx = self.push(Kind::Object, start);
                self.pos += 1;
                self.ws();
                if self.eat(b'}').is_none() {
                    loop {
                        self.ws();
                        let key = self.string()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                        let (_, end) = self.value(depth + 1)?;
                        self.nodes[idx].children.push((key.0, end));
                        self.nodes[idx].keys.push(key);
                        self.ws();
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                self.nodes[idx].end = self.pos;
            }
            b'[' => {
                let idx = self.push(Kind::Array, start);
                self.pos += 1;
                self.ws();
                if self.eat(b']').is_none() {
                    loop {
                        self.ws();
                        let span = self.value(depth + 1)?;
                        self.nodes[idx].children.push(span);
                        self.ws();
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                self.nodes[idx].end = self.pos;
            }
            b'"' => {
                let (s, e) = self.string()?;
                let idx = self.push(Kind::String, s);
                self.nodes[idx].end = e;
            }
            b'-' | b'0'..=b'9' => {
                while self.text.get(self.pos).is_some_and(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.pos += 1;
                }
                let idx = self.push(Kind::Number, start);
                self.nodes[idx].end = self.pos;
            }
            b't' | b'f' | b'n' => {
                for word in [&b"true"[..], b"false", b"null"] {
                    if self.text[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        let idx = self.push(Kind::Literal, start);
                        self.nodes[idx].end = self.pos;
                        return Some((start, self.pos));
                    }
                }
                return None;
            }
            _ => return None,
        }
        Some((start, self.pos))
    }

    /// A string at `pos` (quotes included in the span).
    fn string(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        self.eat(b'"')?;
        loop {
            match *self.text.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some((start, self.pos));
                }
                b'\\' => self.pos += 2,
                _ => self.pos += 1,
            }
        }
    }
}

/// The byte ranges of `text[start..end]` outside strings (for separator rewrites).
pub fn outside_strings(text: &[u8], start: usize, end: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut i = start;
    while i < end.min(text.len()) {
        let b = text[i];
        if in_string {
            if b == b'\\' {
                i += 1;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else {
            out.push(i);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_values_of_a_document_and_of_jsonl_lines() {
        let doc = br#"{"a": [1, "x\"y", true], "b": {}}"#;
        let nodes = scan(doc);
        let kinds: Vec<Kind> = nodes.iter().map(|n| n.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::Object,
                Kind::Array,
                Kind::Number,
                Kind::String,
                Kind::Literal,
                Kind::Object
            ]
        );
        assert_eq!(&doc[nodes[3].start..nodes[3].end], br#""x\"y""#);
        assert_eq!(nodes[1].children.len(), 3);
        let lines = b"{\"a\":1}\nnot json\n[2]\n";
        let nodes = scan(lines);
        assert_eq!(nodes.len(), 4);
        assert_eq!(&lines[nodes[3].start..nodes[3].end], b"2");
    }
}
