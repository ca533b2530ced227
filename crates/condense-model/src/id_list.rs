//! A list of message ids that keeps consecutive synthetic ids as runs.
//!
//! Formats whose messages carry no ids of their own (Anthropic and OpenAI request bodies) get
//! [`synthetic_id`]s: `#0`, `#1`, … A stage state that names the messages it covers (a
//! context-collapse span: 1,596 ids at 1M tokens) would spell every one of them, and the state
//! is read and written at every run. [`IdList`] keeps a run of consecutive synthetic ids as its
//! two ends instead, and any other id as it is. In JSON it is an array of strings and
//! `[first, last]` pairs, a pair standing for `#first` to `#last`; an array of strings only
//! (what such states held before) reads the same.
//!
//! ```
//! use condense_model::id_list::IdList;
//!
//! let ids: IdList = ["u1", "#3", "#4", "#5", "a1"].into_iter().collect();
//! assert_eq!(serde_json::to_string(&ids)?, r#"["u1",[3,5],"a1"]"#);
//! assert_eq!(ids.len(), 5);
//! assert_eq!(ids.position("#4"), Some(2));
//! assert!(ids.iter().skip(1).next().is_some_and(|id| id.is("#3")));
//! let back: IdList = serde_json::from_str(r##"["u1","#3","#4","#5","a1"]"##)?;
//! assert_eq!(back, ids);
//! # Ok::<(), serde_json::Error>(())
//! ```

use crate::{synthetic_id, synthetic_index};
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// Message ids in order; see the [module docs](self). Equal lists are equal however they were
/// built: runs are always as long as they can be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdList {
    items: Vec<Item>,
    len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// An id that is not synthetic.
    Id(String),
    /// `#first` to `#last`, both included (`first <= last`).
    Run { first: usize, last: usize },
}

/// One id of an [`IdList`], without building its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRef<'a> {
    Id(&'a str),
    Synthetic(usize),
}

impl<'a> IdRef<'a> {
    /// Whether this is `id`.
    pub fn is(self, id: &str) -> bool {
        match self {
            IdRef::Id(own) => own == id,
            IdRef::Synthetic(n) => synthetic_index(id) == Some(n),
        }
    }

    /// The id's text (borrowed when it is not synthetic).
    pub fn to_text(self) -> Cow<'a, str> {
        match self {
            IdRef::Id(own) => Cow::Borrowed(own),
            IdRef::Synthetic(n) => Cow::Owned(synthetic_id(n)),
        }
    }
}

impl IdList {
    /// How many ids the list holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list holds no id.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `id`.
    pub fn push(&mut self, id: &str) {
        match synthetic_index(id) {
            Some(n) => self.push_run(n, n),
            None => {
                self.items.push(Item::Id(id.to_string()));
                self.len += 1;
            }
        }
    }

    /// Appends `#first` to `#last`, joined to the run before when it continues it.
    fn push_run(&mut self, first: usize, last: usize) {
        // Saturating: a damaged state may name a run of every index there is.
        self.len = self.len.saturating_add(last - first).saturating_add(1);
        if let Some(Item::Run { last: end, .. }) = self.items.last_mut() {
            if end.checked_add(1) == Some(first) {
                *end = last;
                return;
            }
        }
        self.items.push(Item::Run { first, last });
    }

    /// Appends every id of `other`.
    pub fn extend(&mut self, other: IdList) {
        for item in other.items {
            match item {
                Item::Id(id) => {
                    self.items.push(Item::Id(id));
                    self.len += 1;
                }
                Item::Run { first, last } => self.push_run(first, last),
            }
        }
    }

    /// The ids in order.
    pub fn iter(&self) -> impl Iterator<Item = IdRef<'_>> + '_ {
        self.items.iter().flat_map(|item| {
            let (one, run) = match item {
                Item::Id(id) => (Some(IdRef::Id(id)), None),
                Item::Run { first, last } => (None, Some((*first..=*last).map(IdRef::Synthetic))),
            };
            one.into_iter().chain(run.into_iter().flatten())
        })
    }

    /// The first id's text.
    pub fn first(&self) -> Option<Cow<'_, str>> {
        self.iter().next().map(IdRef::to_text)
    }

    /// The last id's text.
    pub fn last(&self) -> Option<Cow<'_, str>> {
        self.items.last().map(|item| match item {
            Item::Id(id) => Cow::Borrowed(id.as_str()),
            Item::Run { last, .. } => Cow::Owned(synthetic_id(*last)),
        })
    }

    /// Where `id` first is in the list.
    pub fn position(&self, id: &str) -> Option<usize> {
        let wanted = synthetic_index(id);
        let mut at = 0;
        for item in &self.items {
            match (item, wanted) {
                (Item::Id(own), None) if own == id => return Some(at),
                (Item::Id(_), _) => at += 1,
                (Item::Run { first, last }, Some(n)) if (*first..=*last).contains(&n) => {
                    return Some(at + (n - first));
                }
                (Item::Run { first, last }, _) => at += last - first + 1,
            }
        }
        None
    }
}

impl<'a> FromIterator<&'a str> for IdList {
    fn from_iter<I: IntoIterator<Item = &'a str>>(ids: I) -> Self {
        let mut list = IdList::default();
        for id in ids {
            list.push(id);
        }
        list
    }
}

impl Serialize for IdList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.items.len()))?;
        for item in &self.items {
            match item {
                Item::Id(id) => seq.serialize_element(id)?,
                // A run of one reads as the id itself (what a list of strings held).
                Item::Run { first, last } if first == last => {
                    seq.serialize_element(&synthetic_id(*first))?;
                }
                Item::Run { first, last } => seq.serialize_element(&[first, last])?,
            }
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for IdList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ListVisitor)
    }
}

struct ListVisitor;

/// One element of the JSON array: an id or a run's two ends. Read by hand rather than as an
/// untagged enum, which buffers every element first.
enum Element {
    Id,
    Run(usize, usize),
}

/// Reads one element, pushing an id straight onto the list (no copy of a borrowed one).
struct ElementSeed<'l>(&'l mut IdList);

impl<'de> serde::de::DeserializeSeed<'de> for ElementSeed<'_> {
    type Value = Element;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Element, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementSeed<'_> {
    type Value = Element;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message id or a [first, last] run of synthetic ids")
    }

    fn visit_str<E: serde::de::Error>(self, id: &str) -> Result<Element, E> {
        self.0.push(id);
        Ok(Element::Id)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element, A::Error> {
        let end = |seq: &mut A| {
            seq.next_element::<usize>()?
                .ok_or_else(|| A::Error::custom("a run needs its first and last index"))
        };
        let (first, last) = (end(&mut seq)?, end(&mut seq)?);
        if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            return Err(A::Error::custom("a run has two indices only"));
        }
        Ok(Element::Run(first, last))
    }
}

impl<'de> Visitor<'de> for ListVisitor {
    type Value = IdList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of message ids and [first, last] runs of synthetic ids")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IdList, A::Error> {
        let mut list = IdList::default();
        while let Some(element) = seq.next_element_seed(ElementSeed(&mut list))? {
            match element {
                Element::Id => {}
                Element::Run(first, last) if first <= last => list.push_run(first, last),
                Element::Run(first, last) => {
                    return Err(A::Error::custom(format!(
                        "the run [{first}, {last}] ends before it starts"
                    )))
                }
            }
        }
        Ok(list)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A list of strings, as states held them before runs.
    fn strings(ids: &[String]) -> String {
        serde_json::to_string(ids).unwrap()
    }

    /// Generated id lists (synthetic ids in and out of order, repeated, `#01`-like look-alikes
    /// and other ids): every operation agrees with the same list kept as strings, and the
    /// JSON reads back to the same list from either form.
    #[test]
    fn agrees_with_a_list_of_strings() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..500 {
            let mut plain: Vec<String> = Vec::new();
            let mut at = next(5) as usize;
            for _ in 0..next(40) {
                let id = match next(10) {
                    0 => format!("u{}", next(5)),
                    1 => "#01".to_string(),
                    2 => {
                        at = next(50) as usize;
                        synthetic_id(at)
                    }
                    _ => {
                        at += 1;
                        synthetic_id(at)
                    }
                };
                plain.push(id);
            }
            let list: IdList = plain.iter().map(String::as_str).collect();
            assert_eq!(list.len(), plain.len());
            assert_eq!(list.is_empty(), plain.is_empty());
            let texts: Vec<String> = list.iter().map(|id| id.to_text().into_owned()).collect();
            assert_eq!(texts, plain);
            assert_eq!(list.first().as_deref(), plain.first().map(String::as_str));
            assert_eq!(list.last().as_deref(), plain.last().map(String::as_str));
            for probe in plain
                .iter()
                .chain(["#0", "#7", "u9", "#"].map(String::from).iter())
            {
                assert_eq!(list.position(probe), plain.iter().position(|p| p == probe));
                for (mine, theirs) in list.iter().zip(&plain) {
                    assert_eq!(mine.is(probe), theirs == probe);
                }
            }
            let json = serde_json::to_string(&list).unwrap();
            assert!(json.len() <= strings(&plain).len(), "{json}");
            assert_eq!(serde_json::from_str::<IdList>(&json).unwrap(), list);
            assert_eq!(
                serde_json::from_str::<IdList>(&strings(&plain)).unwrap(),
                list
            );
            let (a, b) = plain.split_at(next(plain.len() as u64 + 1) as usize);
            let mut joined: IdList = a.iter().map(String::as_str).collect();
            joined.extend(b.iter().map(String::as_str).collect());
            assert_eq!(joined, list, "extend keeps runs as long as they can be");
        }
    }

    #[test]
    fn json_of_runs_and_bad_runs() {
        let ids: IdList = ["#0", "#1", "#2", "x", "#7", "#9", "#10"]
            .into_iter()
            .collect();
        assert_eq!(
            serde_json::to_string(&ids).unwrap(),
            r##"[[0,2],"x","#7",[9,10]]"##
        );
        let all: IdList = serde_json::from_str(&format!("[\"x\",[0,{}]]", usize::MAX)).unwrap();
        assert_eq!(all.len(), usize::MAX, "counted without overflowing");
        assert_eq!(all.position("#7"), Some(8));
        let err = serde_json::from_str::<IdList>("[[5,4]]").unwrap_err();
        assert!(err.to_string().contains("ends before it starts"), "{err}");
        assert!(serde_json::from_str::<IdList>(r#"[1]"#).is_err());
        assert!(serde_json::from_str::<IdList>(r#"[[1]]"#).is_err());
        assert!(serde_json::from_str::<IdList>(r#"[[1,2,3]]"#).is_err());
        assert!(serde_json::from_str::<IdList>(r##""#0""##).is_err());
    }
}
