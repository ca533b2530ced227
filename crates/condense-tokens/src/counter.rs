//! [`TokenCounter`]: what blocks, messages and conversations cost, with a cache by content hash.

use crate::budget::{Budget, BudgetConfig};
use crate::image::image_tokens;
use crate::tokenizer::{tokenizer, Tokenizer, TokenizerKind};
use condense_model::{Block, Content, Conversation, Message, Role, ToolDef};
use serde::Serialize;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Tokens added to every message (and to a system prompt) for its role and the separators
/// around it. OpenAI's chat format costs 3 per message plus the role name (1 for all roles);
/// Goose and the OpenAI cookbook use the same figure.
pub const MESSAGE_OVERHEAD_TOKENS: usize = 4;

/// Default cache capacity (entries); the cache is cleared when it grows past it. An entry is
/// about 16 bytes, so the default holds on to about 16 MB at most.
pub const DEFAULT_CACHE_CAPACITY: usize = 1 << 20;

/// Seed of the hash that keys tool definitions, so they never collide with block hashes.
const TOOL_DEF_SEED: u64 = 0x746f_6f6c_5f64_6566; // "tool_def"

/// Block hash -> tokens. The keys are xxh3 hashes already: they are used as they are.
type Cache = HashMap<u64, u32, BuildHasherDefault<PassThrough>>;

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
}

impl ConversationCount {
    /// What a budget calls fixed: system prompt, tool definitions and [`Role::System`] messages.
    pub fn fixed(&self) -> usize {
        self.system + self.tools + self.system_messages
    }

    /// What a budget calls messages: everything but [`Self::fixed`].
    pub fn conversation(&self) -> usize {
        self.total - self.fixed()
    }

    /// The budget for these counts.
    pub fn budget(&self, config: &BudgetConfig) -> Budget {
        Budget::compute(config, self.fixed(), self.conversation())
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
    cache: RwLock<Cache>,
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
    /// results run after run, and texts the conversation count already cached as blocks.
    pub fn count_text_cached(&self, text: &str) -> usize {
        // Hashing and a lookup cost more than tokenizing a word or two; from 16 bytes on the
        // cache wins (a summary's record counts the same short lines commit after commit: 3x
        // faster first runs of levels 4-5 with the threshold at 16 instead of 64).
        if text.len() < 16 {
            return self.tokenizer.count(text);
        }
        self.cached(Block::text_hash(text), || self.tokenizer.count(text))
    }

    /// Tokens of a block, cached: text and thinking count their text; a tool use its name and
    /// its input JSON text; a tool result the blocks it holds; an image an estimate from its
    /// dimensions (see [`crate::image`]); an opaque block its JSON text.
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
        let key = xxhash_rust::xxh3::xxh3_64_with_seed(raw.as_bytes(), TOOL_DEF_SEED);
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
        let tools = conversation.tools.iter().map(|t| self.count_tool(t)).sum();

        let keys: Vec<u64> = conversation
            .messages
            .iter()
            .filter(|m| m.is_chat())
            .flat_map(|m| m.content.blocks.iter().map(Block::content_hash))
            .collect();
        let found: Vec<Option<u32>> =
            self.read_cache(|cache| keys.iter().map(|k| cache.get(k).copied()).collect());
        let misses = found.iter().filter(|f| f.is_none()).count();
        self.hits
            .fetch_add((keys.len() - misses) as u64, Ordering::Relaxed);
        self.misses.fetch_add(misses as u64, Ordering::Relaxed);

        let mut fresh: Vec<(u64, usize)> = Vec::with_capacity(misses);
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
                for block in &m.content.blocks {
                    // `keys` holds one key per chat block, in this order.
                    let Some((key, hit)) = next.next() else { break };
                    n += match hit {
                        Some(count) => count as usize,
                        None => {
                            let count = self.block_cost(block);
                            fresh.push((*key, count));
                            count
                        }
                    };
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
                    self.insert_bounded(cache, key, count);
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
        }
    }

    /// The budget of a conversation under a configuration.
    pub fn budget(&self, conversation: &Conversation, config: &BudgetConfig) -> Budget {
        self.count_conversation(conversation).budget(config)
    }

    /// Entries in the cache.
    pub fn cache_len(&self) -> usize {
        self.read_cache(|cache| cache.len())
    }

    /// Empties the cache (the statistics stay).
    pub fn clear_cache(&self) {
        self.write_cache(HashMap::clear);
    }

    /// Cache hits, misses and size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.cache_len(),
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
            Block::Text(t) => tok.count(&t.text),
            Block::Thinking(t) => tok.count(&t.thinking),
            Block::ToolUse(t) => tok.count(&t.name) + tok.count(t.input.as_str()),
            Block::ToolResult(t) => self.count_content(&t.content),
            Block::Image(image) => image_tokens(image),
            Block::Opaque(o) => tok.count(o.json.as_str()),
        }
    }

    fn cached(&self, key: u64, count: impl FnOnce() -> usize) -> usize {
        if let Some(n) = self.read_cache(|cache| cache.get(&key).copied()) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n as usize;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let n = count();
        self.write_cache(|cache| self.insert_bounded(cache, key, n));
        n
    }

    // A panic while holding the lock cannot leave the map inconsistent (every critical section
    // is one std map call), so a poisoned lock is used as is.
    fn read_cache<R>(&self, f: impl FnOnce(&Cache) -> R) -> R {
        let guard = self.cache.read().unwrap_or_else(|e| e.into_inner());
        f(&guard)
    }

    fn write_cache<R>(&self, f: impl FnOnce(&mut Cache) -> R) -> R {
        let mut guard = self.cache.write().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Caches `count` under `key`, emptying the cache first when it is full. Counts above
    /// u32::MAX (a 16 GB block) are not cached.
    fn insert_bounded(&self, cache: &mut Cache, key: u64, count: usize) {
        if let Ok(stored) = u32::try_from(count) {
            if cache.len() >= self.capacity {
                cache.clear();
            }
            cache.insert(key, stored);
        }
    }
}

/// The cache keys are already xxh3 hashes: use them as they are.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used for u64 keys; fold anything else in for completeness.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
