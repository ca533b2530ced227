//! [`TokenCounter`]: what blocks, messages and conversations cost, with a cache by content hash.

use crate::pretokenize::line_parts;
use crate::tokenizer::{tokenizer, Tokenizer, TokenizerKind};
use condense_budget::image::image_tokens;
use condense_budget::{Budget, BudgetConfig, MESSAGE_OVERHEAD_TOKENS};
use condense_model::prehashed::PrehashedMap;
use condense_model::{Block, Content, Conversation, CountTokens, Message, Role, ToolDef};
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use twox_hash::XxHash3_64;

/// Default cache capacity (entries); the cache is cleared when it grows past it. An entry is
/// about 16 bytes, so the default holds on to about 16 MB at most.
pub const DEFAULT_CACHE_CAPACITY: usize = 1 << 20;

/// Text to tokenize from which [`TokenCounter::count_conversation`] counts its cold blocks on
/// all cores: about 64 KB is 16k tokens, 2-4 ms of one core; less is not worth waking threads.
pub const PARALLEL_MIN_BYTES: usize = 64 * 1024;

/// Seed of the hash that keys tool definitions, so they never collide with block hashes.
const TOOL_DEF_SEED: u64 = 0x746f_6f6c_5f64_6566; // "tool_def"

/// Texts from this many bytes that [`TokenCounter::count_text_cached`] has not seen whole are
/// counted in line parts, each cached: a summary rewritten at every commit, or a tool result
/// that grew, is mostly lines counted before.
pub const LINE_PARTS_FROM: usize = 1024;

/// The smallest line part worth its own cache entry (a few lines of a summary): hashing and a
/// lookup cost about what tokenizing 16 bytes does.
const LINE_PART_MIN: usize = 64;

/// A line part ends at the first allowed place past this many bytes, whatever its lines (see
/// `line_parts`): long enough that a text of ordinary lines is cut where its lines say, short
/// enough that a change costs a few kilobytes counted again.
const LINE_PART_MAX: usize = 4096;

/// Block hash -> tokens. The keys are xxh3 hashes already: they are used as they are.
/// The cache keys are xxh3 hashes already: used as they are.
type Cache = PrehashedMap<u64, u32>;

/// The cache and the counts this process computed since the last [`TokenCounter::take_fresh`].
/// Both live under one lock: every fresh count is inserted into the map under the write lock
/// anyway, so recording it there costs a push and no second lock.
#[derive(Default)]
struct State {
    map: Cache,
    fresh: Vec<(u64, u32)>,
    /// Line parts of texts counted by [`TokenCounter::count_text_cached`], by their xxh3.
    /// Kept for this process only: a part is no block, and the store keeps blocks' counts.
    parts: Cache,
}

/// Token counts of a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConversationCount {
    /// The top-level system prompt (with [`MESSAGE_OVERHEAD_TOKENS`] when there is one).
    pub system: usize,
    /// All tool definitions.
    pub tools: usize,
    /// Per message, at the message's index; 0 for [`Role::Event`] lines.
    pub messages: Vec<usize>,
    /// Of `messages`, the part in [`Role::System`] messages (the budget counts them as fixed).
    pub system_messages: usize,
    /// `system + tools + sum(messages)`.
    pub total: usize,
    /// Per block of the chat messages (not of [`Role::Event`] lines), in order: what a
    /// breakdown by block needs without hashing every block again.
    #[serde(skip)]
    pub blocks: Vec<usize>,
}

impl ConversationCount {
    /// What a budget calls fixed: system prompt, tool definitions and [`Role::System`] messages.
    pub fn fixed(&self) -> usize {
        self.system + self.tools + self.system_messages
    }

    /// Every message's tokens, [`Role::System`] ones included: all but the system prompt and
    /// the tool definitions.
    pub fn in_messages(&self) -> usize {
        self.total - self.system - self.tools
    }

    /// What a budget calls messages: everything but [`Self::fixed`].
    pub fn conversation(&self) -> usize {
        self.total - self.fixed()
    }

    /// The budget for these counts.
    pub fn budget(&self, config: &BudgetConfig) -> Budget {
        Budget::compute(config, self.fixed(), self.conversation())
    }

    /// The counts of a conversation whose messages are `prefix`'s followed by these, under
    /// this frame (system prompt and tools): what counting it whole gives, without hashing the
    /// prefix's blocks again.
    ///
    /// ```
    /// use condense_model::{Block, Conversation, Message, Role};
    /// use condense_tokens::{TokenCounter, TokenizerKind};
    /// let counter = TokenCounter::new(TokenizerKind::Estimate);
    /// let m = |t: &str| Message::new("#0", Role::User, vec![Block::text(t)]);
    /// let whole = Conversation { messages: vec![m("one two"), m("three")], ..Default::default() };
    /// let (mut head, mut tail) = (whole.clone(), whole.clone());
    /// head.messages.truncate(1);
    /// tail.messages.remove(0);
    /// let joined = counter.count_conversation(&tail).after(&counter.count_conversation(&head));
    /// assert_eq!(joined, counter.count_conversation(&whole));
    /// ```
    pub fn after(self, prefix: &ConversationCount) -> ConversationCount {
        let mut messages = Vec::with_capacity(prefix.messages.len() + self.messages.len());
        messages.extend_from_slice(&prefix.messages);
        messages.extend_from_slice(&self.messages);
        let mut blocks = Vec::with_capacity(prefix.blocks.len() + self.blocks.len());
        blocks.extend_from_slice(&prefix.blocks);
        blocks.extend_from_slice(&self.blocks);
        let in_messages = prefix.in_messages() + self.in_messages();
        ConversationCount {
            system: self.system,
            tools: self.tools,
            messages,
            system_messages: prefix.system_messages + self.system_messages,
            total: self.system + self.tools + in_messages,
            blocks,
        }
    }
}

/// Cache statistics since the counter was made (or since [`TokenCounter::reset_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to count (nested tool result blocks are looked up on their own too).
    pub misses: u64,
    /// Entries in the cache now.
    pub entries: usize,
    /// Line parts of long texts in the cache now (see [`TokenCounter::count_text_cached`]).
    pub line_parts: usize,
}

/// Counts tokens with one tokenizer and caches what blocks cost by [`Block::content_hash`].
///
/// A block a stage did not touch hashes the same and is never counted twice, so counting a
/// conversation again after a stage only pays for the blocks that changed (plus hashing the
/// others, which is far cheaper than tokenizing them). Shareable across threads; counting
/// happens outside the cache lock. With [`TokenizerKind::Estimate`] the cache saves nothing
/// (hashing a block costs more than dividing its length) but behaves the same.
pub struct TokenCounter {
    tokenizer: &'static dyn Tokenizer,
    kind: TokenizerKind,
    cache: RwLock<State>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("tokenizer", &self.kind)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Counts with the text cache ([`TokenCounter::count_text_cached`]): what stages get through
/// the host, so a measuring helper (`condense-turns`) gives the same figures on either side of
/// the plugin boundary.
impl CountTokens for TokenCounter {
    fn count_tokens(&self, text: &str) -> usize {
        self.count_text_cached(text)
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter::new(TokenizerKind::default())
    }
}

impl TokenCounter {
    /// A counter with the process-wide tokenizer of `kind` and an empty cache of
    /// [`DEFAULT_CACHE_CAPACITY`].
    pub fn new(kind: TokenizerKind) -> Self {
        TokenCounter::with_capacity(kind, DEFAULT_CACHE_CAPACITY)
    }

    /// A counter whose cache is cleared whenever it would grow past `capacity` entries (at
    /// least 1).
    pub fn with_capacity(kind: TokenizerKind, capacity: usize) -> Self {
        TokenCounter {
            tokenizer: tokenizer(kind),
            kind,
            cache: RwLock::default(),
            capacity: capacity.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The tokenizer kind.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    /// Tokens of a text, not cached.
    pub fn count_text(&self, text: &str) -> usize {
        self.tokenizer.count(text)
    }

    /// Tokens of a text, cached under the key of a text block holding it
    /// ([`Block::text_hash`]): what stages get through the host. They count the same tool
    /// results run after run, and texts the conversation count already cached as blocks. A
    /// long text not seen whole ([`LINE_PARTS_FROM`] bytes or more) is counted by line parts,
    /// each cached for the process, so a text that is mostly lines seen before (a running
    /// summary rewritten at every commit) costs hashing and its new lines.
    pub fn count_text_cached(&self, text: &str) -> usize {
        // Hashing and a lookup cost more than tokenizing a word or two; from 16 bytes on the
        // cache wins (a summary's record counts the same short lines commit after commit: 3x
        // faster first runs of levels 4-5 with the threshold at 16 instead of 64).
        if text.len() < 16 {
            return self.tokenizer.count(text);
        }
        self.cached(Block::text_hash(text), || self.count_in_line_parts(text))
    }

    /// Tokens of a text that is built again and again with small changes (a summary rendered,
    /// trimmed and rendered again): counted by line parts like
    /// [`count_text_cached`](Self::count_text_cached), so only its new lines are tokenized, but
    /// the whole text is not cached: it is not a block, and a run that keeps the counts it
    /// made would store every draft's. The same count as [`count_text`](Self::count_text).
    pub fn count_text_drafted(&self, text: &str) -> usize {
        self.count_in_line_parts(text)
    }

    /// Tokens of `text`, counted part by part when it is long and the tokenizer allows it
    /// ([`Tokenizer::additive_at_line_starts`]): parts seen before are not counted again. The
    /// same count as the whole text's; one read lock for the lookups, one write lock for what
    /// was new.
    fn count_in_line_parts(&self, text: &str) -> usize {
        if text.len() < LINE_PARTS_FROM || !self.tokenizer.additive_at_line_starts() {
            return self.tokenizer.count(text);
        }
        let parts: Vec<&str> = line_parts(text, LINE_PART_MIN, LINE_PART_MAX).collect();
        if parts.len() < 2 {
            return self.tokenizer.count(text);
        }
        let keys: Vec<u64> = parts
            .iter()
            .map(|p| XxHash3_64::oneshot(p.as_bytes()))
            .collect();
        let found: Vec<Option<u32>> =
            self.read_cache(|cache| keys.iter().map(|k| cache.parts.get(k).copied()).collect());
        let mut total = 0;
        let mut new: Vec<(u64, u32)> = Vec::new();
        for ((part, key), hit) in parts.iter().zip(&keys).zip(found) {
            total += match hit {
                Some(n) => n as usize,
                None => {
                    let n = self.tokenizer.count(part);
                    if let Ok(stored) = u32::try_from(n) {
                        new.push((*key, stored));
                    }
                    n
                }
            };
        }
        if !new.is_empty() {
            self.write_cache(|cache| {
                if cache.parts.len() + new.len() > self.capacity {
                    cache.parts.clear();
                }
                cache.parts.extend(new);
            });
        }
        total
    }

    /// Tokens of a block, cached: text and thinking count their text; a tool use its name and
    /// its input JSON text; a tool result the blocks it holds; an image an estimate from its
    /// dimensions (see [`condense_budget::image`]); an opaque block its JSON text.
    pub fn count_block(&self, block: &Block) -> usize {
        self.cached(block.content_hash(), || self.block_cost(block))
    }

    /// Tokens of the blocks of a content.
    pub fn count_content(&self, content: &Content) -> usize {
        content.blocks.iter().map(|b| self.count_block(b)).sum()
    }

    /// Tokens of a message: its blocks plus [`MESSAGE_OVERHEAD_TOKENS`]. A [`Role::Event`]
    /// line is not sent to the model and costs 0.
    pub fn count_message(&self, message: &Message) -> usize {
        if !message.is_chat() {
            return 0;
        }
        MESSAGE_OVERHEAD_TOKENS + self.count_content(&message.content)
    }

    /// Tokens of a tool definition: its whole JSON text, cached.
    pub fn count_tool(&self, tool: &ToolDef) -> usize {
        let raw = tool.raw.as_str();
        let key = XxHash3_64::oneshot_with_seed(TOOL_DEF_SEED, raw.as_bytes());
        self.cached(key, || self.tokenizer.count(raw))
    }

    /// Tokens of the top-level system prompt: its blocks plus [`MESSAGE_OVERHEAD_TOKENS`], or 0
    /// when there is none or it is empty.
    pub fn count_system(&self, conversation: &Conversation) -> usize {
        match &conversation.system {
            Some(content) if !content.blocks.is_empty() => {
                MESSAGE_OVERHEAD_TOKENS + self.count_content(content)
            }
            _ => 0,
        }
    }

    /// Tokens of a whole conversation: system prompt, tool definitions and each message.
    ///
    /// The message blocks are looked up in one batch (one read lock for all of them, one write
    /// lock for what was missing), so a warm count costs little more than hashing the text.
    pub fn count_conversation(&self, conversation: &Conversation) -> ConversationCount {
        let system = self.count_system(conversation);
        let tools = self
            .costs(
                &conversation.tools,
                |t| t.raw.as_str().len(),
                |t| self.count_tool(t),
            )
            .iter()
            .sum();

        let blocks: Vec<&Block> = conversation
            .messages
            .iter()
            .filter(|m| m.is_chat())
            .flat_map(|m| m.content.blocks.iter())
            .collect();
        let keys: Vec<u64> = blocks.iter().map(|b| b.content_hash()).collect();
        let found: Vec<Option<u32>> =
            self.read_cache(|cache| keys.iter().map(|k| cache.map.get(k).copied()).collect());
        let missing: Vec<&Block> = blocks
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(b, _)| *b)
            .collect();
        self.hits
            .fetch_add((keys.len() - missing.len()) as u64, Ordering::Relaxed);
        self.misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        let mut computed = self
            .costs(&missing, |b| text_len(b), |b| self.block_cost(b))
            .into_iter();

        let mut fresh: Vec<(u64, usize)> = Vec::with_capacity(missing.len());
        let mut per_block: Vec<usize> = Vec::with_capacity(keys.len());
        let mut next = keys.iter().zip(found);
        let mut system_messages = 0;
        let messages: Vec<usize> = conversation
            .messages
            .iter()
            .map(|m| {
                if !m.is_chat() {
                    return 0;
                }
                let mut n = MESSAGE_OVERHEAD_TOKENS;
                for _ in &m.content.blocks {
                    // `keys` holds one key per chat block, in this order, and `computed` one
                    // count per miss, in this order too.
                    let Some((key, hit)) = next.next() else { break };
                    let block = match hit {
                        Some(count) => count as usize,
                        None => {
                            let count = computed.next().unwrap_or(0);
                            fresh.push((*key, count));
                            count
                        }
                    };
                    per_block.push(block);
                    n += block;
                }
                if m.role == Role::System {
                    system_messages += n;
                }
                n
            })
            .collect();
        if !fresh.is_empty() {
            self.write_cache(|cache| {
                for (key, count) in fresh {
                    self.insert_fresh(cache, key, count);
                }
            });
        }
        let total = system + tools + messages.iter().sum::<usize>();
        ConversationCount {
            system,
            tools,
            messages,
            system_messages,
            total,
            blocks: per_block,
        }
    }

    /// [`Self::count_conversation`] of each conversation, in order. Many small conversations
    /// (a tau-bench file holds 200, each under [`PARALLEL_MIN_BYTES`]) are spread over the cores
    /// together once their text adds up to the threshold; a big one also splits its own blocks.
    pub fn count_conversations(&self, conversations: &[Conversation]) -> Vec<ConversationCount> {
        let bytes = |c: &Conversation| -> usize {
            let messages: usize = c
                .messages
                .iter()
                .flat_map(|m| m.content.blocks.iter())
                .map(text_len)
                .sum();
            messages + c.tools.iter().map(|t| t.raw.as_str().len()).sum::<usize>()
        };
        let parallel = conversations.len() > 1 && {
            let mut total = 0;
            conversations.iter().any(|c| {
                total += bytes(c);
                total >= PARALLEL_MIN_BYTES
            })
        };
        if parallel {
            conversations
                .par_iter()
                .map(|c| self.count_conversation(c))
                .collect()
        } else {
            conversations
                .iter()
                .map(|c| self.count_conversation(c))
                .collect()
        }
    }

    /// `cost` of each item, in order: on the rayon pool when the items hold at least
    /// [`PARALLEL_MIN_BYTES`] of text (by `bytes`), else on this thread. Below that, the work is
    /// a few milliseconds at most, and the pool's start (once per process) and hand-offs would
    /// eat what a second core saves; warm counts (no misses) never get here with any work.
    fn costs<T: Sync>(
        &self,
        items: &[T],
        bytes: impl Fn(&T) -> usize,
        cost: impl Fn(&T) -> usize + Sync + Send,
    ) -> Vec<usize> {
        let parallel = items.len() > 1 && {
            let mut total = 0;
            items.iter().any(|t| {
                total += bytes(t);
                total >= PARALLEL_MIN_BYTES
            })
        };
        if parallel {
            items.par_iter().map(cost).collect()
        } else {
            items.iter().map(cost).collect()
        }
    }

    /// The budget of a conversation under a configuration.
    pub fn budget(&self, conversation: &Conversation, config: &BudgetConfig) -> Budget {
        self.count_conversation(conversation).budget(config)
    }

    /// Entries in the cache.
    pub fn cache_len(&self) -> usize {
        self.read_cache(|cache| cache.map.len())
    }

    /// Empties the cache, line parts included (the statistics and the fresh counts not yet
    /// taken stay).
    pub fn clear_cache(&self) {
        self.write_cache(|cache| {
            cache.map.clear();
            cache.parts.clear();
        });
    }

    /// Seeds the cache with counts an earlier process computed (keys as this cache makes them:
    /// [`Block::content_hash`], [`Block::text_hash`] or a tool definition's key, all from
    /// counters of the same [`TokenizerKind`]).
    ///
    /// Preloaded entries are not fresh (they are not returned by [`Self::take_fresh`]) and do
    /// not count as hits or misses. One write lock for all of them; when they exceed the
    /// capacity, the cache is cleared as it fills, like any insert.
    pub fn preload(&self, entries: impl IntoIterator<Item = (u64, u32)>) {
        self.write_cache(|cache| {
            for (key, count) in entries {
                if cache.map.len() >= self.capacity {
                    cache.map.clear();
                }
                cache.map.insert(key, count);
            }
        });
    }

    /// Returns and forgets the counts this counter computed itself since the last call (what
    /// a store persists so that the next process does not count them again): every cache miss
    /// that was inserted, in the order computed, preloaded entries excluded. Costs a swap, not
    /// a scan of the cache. A count computed by two threads at once may appear twice, with the
    /// same value.
    pub fn take_fresh(&self) -> Vec<(u64, u32)> {
        self.write_cache(|cache| std::mem::take(&mut cache.fresh))
    }

    /// Cache hits, misses and size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.cache_len(),
            line_parts: self.read_cache(|cache| cache.parts.len()),
        }
    }

    /// Sets the hit and miss counters back to 0.
    pub fn reset_stats(&self) {
        self.hits.store(0, Ordering::Relaxed);
        self.misses.store(0, Ordering::Relaxed);
    }

    /// What a block costs, uncached at this level (a tool result's blocks go through the cache).
    fn block_cost(&self, block: &Block) -> usize {
        let tok = self.tokenizer;
        match block {
            // In line parts, each cached: a stage that cuts a long text (snip keeps a result's
            // first lines) counts the cut as the parts it shares with the whole plus its new
            // end, where it counted all of it cold (a tenth of a first run at 1M tokens).
            Block::Text(t) => self.count_in_line_parts(&t.text),
            Block::Thinking(t) => tok.count(&t.thinking),
            Block::ToolUse(t) => tok.count(&t.name) + tok.count(t.input.as_str()),
            Block::ToolResult(t) => self.count_content(&t.content),
            Block::Image(image) => image_tokens(image),
            Block::Opaque(o) => tok.count(o.json.as_str()),
        }
    }

    fn cached(&self, key: u64, count: impl FnOnce() -> usize) -> usize {
        if let Some(n) = self.read_cache(|cache| cache.map.get(&key).copied()) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n as usize;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let n = count();
        self.write_cache(|cache| self.insert_fresh(cache, key, n));
        n
    }

    // A panic while holding the lock cannot leave the map inconsistent (every critical section
    // is one std map call), so a poisoned lock is used as is.
    fn read_cache<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let guard = self.cache.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    fn write_cache<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut guard = self.cache.write().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Caches `count`, which this process computed, under `key` and records it as fresh,
    /// emptying the cache first when it is full. Counts above u32::MAX (a 16 GB block) are
    /// neither cached nor recorded.
    fn insert_fresh(&self, cache: &mut State, key: u64, count: usize) {
        if let Ok(stored) = u32::try_from(count) {
            if cache.map.len() >= self.capacity {
                cache.map.clear();
            }
            cache.map.insert(key, stored);
            cache.fresh.push((key, stored));
        }
    }
}

/// About how many bytes of text counting a block tokenizes (images: none).
fn text_len(block: &Block) -> usize {
    match block {
        Block::Text(t) => t.text.len(),
        Block::Thinking(t) => t.thinking.len(),
        Block::ToolUse(t) => t.name.len() + t.input.as_str().len(),
        Block::ToolResult(t) => t.content.blocks.iter().map(text_len).sum(),
        Block::Image(_) => 0,
        Block::Opaque(o) => o.json.as_str().len(),
    }
}

mod recount;

#[cfg(test)]
mod tests;
