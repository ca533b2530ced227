//! Token counts stored as packed chunks: one row per run that counted something, not one row
//! per block.
//!
//! A session's counts are what a new process preloads so that it tokenizes only new blocks
//! (`Store::token_counts`). Kept one row per block, a 1M-token session's 6,829 counts cost a
//! first run 6,829 inserts into an index (about 8,000 instructions each, 5% of the run), and
//! every later turn a range scan handing back 6,829 rows (5% of the turn). Packed, a run's new
//! counts are one row: `(block hash u64, tokens u32)` little-endian, 12 bytes each, read back
//! by a loop over bytes. A chunk never holds a hash twice; chunks are read oldest first and a
//! later count of a hash replaces an earlier one (a recount). Every [`MAX_CHUNKS`] runs, the
//! chunks of a session are merged into one, so reading stays one or a few rows.

use rusqlite::types::Type;
use rusqlite::{params, Connection};
use std::collections::HashMap;

/// The table (part of the schema from version 3).
const TABLE: &str = "
CREATE TABLE IF NOT EXISTS token_chunks (
    session TEXT NOT NULL,
    tokenizer TEXT NOT NULL,
    seq INTEGER NOT NULL,
    counts BLOB NOT NULL,
    PRIMARY KEY (session, tokenizer, seq)
);
";

/// A session's chunks are merged into one when a commit would make more than this many.
pub const MAX_CHUNKS: i64 = 16;

/// Bytes of one packed count.
const ENTRY: usize = 12;

/// `counts` packed, each hash once (the last count of a hash wins).
pub fn encode(counts: &[(u64, u32)]) -> Vec<u8> {
    let counts = last_of_each(counts.to_vec());
    let mut out = Vec::with_capacity(counts.len() * ENTRY);
    for (hash, tokens) in counts {
        out.extend_from_slice(&hash.to_le_bytes());
        out.extend_from_slice(&tokens.to_le_bytes());
    }
    out
}

/// Appends the counts packed in `chunk` to `out`; `None` when its length is not a whole
/// number of counts (a damaged row).
fn decode_into(chunk: &[u8], out: &mut Vec<(u64, u32)>) -> Option<()> {
    if chunk.len() % ENTRY != 0 {
        return None;
    }
    out.reserve(chunk.len() / ENTRY);
    for e in chunk.chunks_exact(ENTRY) {
        let (hash, tokens) = e.split_at(8);
        out.push((
            u64::from_le_bytes(hash.try_into().ok()?),
            u32::from_le_bytes(tokens.try_into().ok()?),
        ));
    }
    Some(())
}

/// `counts` with each hash once, its last count kept (order otherwise unspecified).
fn last_of_each(mut counts: Vec<(u64, u32)>) -> Vec<(u64, u32)> {
    let mut at: HashMap<u64, usize> = HashMap::with_capacity(counts.len());
    let mut kept = 0;
    for i in 0..counts.len() {
        let (hash, tokens) = counts[i];
        match at.get(&hash) {
            Some(&j) => counts[j].1 = tokens,
            None => {
                at.insert(hash, kept);
                counts[kept] = (hash, tokens);
                kept += 1;
            }
        }
    }
    counts.truncate(kept);
    counts
}

/// The counts stored for (`session`, `tokenizer`), in the order stored: a hash counted again
/// by a later run comes again after its earlier count, which it replaces.
pub fn load(
    conn: &Connection,
    session: &str,
    tokenizer: &str,
) -> rusqlite::Result<Vec<(u64, u32)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT counts FROM token_chunks WHERE session = ?1 AND tokenizer = ?2 ORDER BY seq",
    )?;
    let mut rows = stmt.query([session, tokenizer])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let chunk = row.get_ref(0)?.as_blob()?;
        decode_into(chunk, &mut out).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                Type::Blob,
                format!(
                    "damaged token counts of session {session} ({tokenizer}): {} bytes, not a \
                     multiple of {ENTRY}",
                    chunk.len()
                )
                .into(),
            )
        })?;
    }
    // Not made unique here: the caller keeps the counts in a map, where a later count of a
    // hash replaces an earlier one as it is inserted. Made unique with a map of its own, a
    // turn after the second run paid 2.6 M instructions at a million tokens (SipHash over
    // 7,000 counts) for what is almost never a duplicate (a run stores only what it counted).
    Ok(out)
}

/// Stores `counts` for (`session`, `tokenizer`) as a new chunk, inside the caller's write
/// transaction; when that would make more than [`MAX_CHUNKS`], the session's chunks and
/// `counts` are merged into one instead.
pub fn append(
    tx: &Connection,
    session: &str,
    tokenizer: &str,
    counts: &[(u64, u32)],
) -> rusqlite::Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    let (chunks, next): (i64, i64) = tx
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(MAX(seq) + 1, 0) FROM token_chunks
             WHERE session = ?1 AND tokenizer = ?2",
        )?
        .query_row([session, tokenizer], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let packed = if chunks < MAX_CHUNKS {
        encode(counts)
    } else {
        let mut all = load(tx, session, tokenizer)?;
        all.extend_from_slice(counts);
        tx.prepare_cached("DELETE FROM token_chunks WHERE session = ?1 AND tokenizer = ?2")?
            .execute([session, tokenizer])?;
        encode(&all)
    };
    tx.prepare_cached(
        "INSERT INTO token_chunks (session, tokenizer, seq, counts) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![session, tokenizer, next, packed])?;
    Ok(())
}

/// Schema version 3: the packed table created, and the counts of the one-row-per-block table
/// before it (`tokens`, when there is one) packed into one chunk per session and tokenizer,
/// and that table dropped. Inside the caller's transaction.
pub fn migrate_rows(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(TABLE)?;
    let had_table: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'tokens'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)?;
    if !had_table {
        return Ok(());
    }
    let ids: Vec<(String, String)> = conn
        .prepare("SELECT DISTINCT session, tokenizer FROM tokens")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut rows =
        conn.prepare("SELECT hash, tokens FROM tokens WHERE session = ?1 AND tokenizer = ?2")?;
    for (session, tokenizer) in &ids {
        let entries: Vec<(u64, u32)> = rows
            .query_map([session, tokenizer], |r| {
                // SQLite integers are signed: the hash was kept as its bit pattern.
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, u32>(1)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        append(conn, session, tokenizer, &entries)?;
    }
    conn.execute_batch("DROP TABLE tokens;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(TABLE).unwrap();
        conn
    }

    #[test]
    fn counts_read_back_as_written_whatever_their_bits() {
        let counts = vec![(u64::MAX, u32::MAX), (1 << 63, 1), (0, 0), (5, 7)];
        let mut back = Vec::new();
        decode_into(&encode(&counts), &mut back).unwrap();
        assert_eq!(back, counts);
        assert!(decode_into(&[0; 13], &mut back).is_none());
    }

    /// `counts` as the caller's map keeps them (a later count of a hash replaces an earlier
    /// one), sorted.
    fn latest(counts: &[(u64, u32)]) -> Vec<(u64, u32)> {
        let map: std::collections::BTreeMap<u64, u32> = counts.iter().copied().collect();
        map.into_iter().collect()
    }

    #[test]
    fn later_counts_win_and_chunks_are_merged_every_max_chunks_runs() {
        let conn = db();
        let rows = || -> i64 {
            conn.query_row("SELECT COUNT(*) FROM token_chunks", [], |r| r.get(0))
                .unwrap()
        };
        append(&conn, "s", "o200k_base", &[(1, 10), (2, 20), (1, 11)]).unwrap();
        append(&conn, "s", "o200k_base", &[(2, 21), (3, 30)]).unwrap();
        append(&conn, "s", "cl100k_base", &[(1, 99)]).unwrap();
        // In the order stored, a later count after the one it replaces.
        let got = load(&conn, "s", "o200k_base").unwrap();
        assert_eq!(got, [(1, 11), (2, 20), (2, 21), (3, 30)]);
        assert_eq!(latest(&got), [(1, 11), (2, 21), (3, 30)]);
        assert_eq!(load(&conn, "s", "cl100k_base").unwrap(), [(1, 99)]);
        assert!(load(&conn, "t", "o200k_base").unwrap().is_empty());
        assert_eq!(rows(), 3);

        for i in 0..40u64 {
            append(&conn, "s", "o200k_base", &[(100 + i, 1), (1, 12)]).unwrap();
            let chunks: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM token_chunks WHERE tokenizer = 'o200k_base'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert!((1..=MAX_CHUNKS).contains(&chunks), "{chunks} chunks");
        }
        let got = latest(&load(&conn, "s", "o200k_base").unwrap());
        assert_eq!(got.len(), 3 + 40);
        assert!(got.contains(&(1, 12)) && got.contains(&(139, 1)) && got.contains(&(3, 30)));
        // Merged every MAX_CHUNKS runs, the chunks hand back each hash once but in the chunks
        // after the last merge (42 unmerged chunks would hand back 84 counts, `(1, 12)` once a
        // chunk).
        let stored = load(&conn, "s", "o200k_base").unwrap();
        assert!(
            stored.len() <= got.len() + 2 * MAX_CHUNKS as usize,
            "{}",
            stored.len()
        );
    }

    #[test]
    fn a_damaged_chunk_is_an_error_naming_the_session() {
        let conn = db();
        conn.execute(
            "INSERT INTO token_chunks VALUES ('s', 'o200k_base', 0, x'0102')",
            [],
        )
        .unwrap();
        let e = load(&conn, "s", "o200k_base").unwrap_err().to_string();
        assert!(e.contains("damaged token counts of session s"), "{e}");
    }

    #[test]
    fn rows_of_schema_2_become_one_chunk_per_session() {
        let conn = db();
        conn.execute_batch(
            "CREATE TABLE tokens (session TEXT NOT NULL, tokenizer TEXT NOT NULL,
                 hash INTEGER NOT NULL, tokens INTEGER NOT NULL,
                 PRIMARY KEY (session, tokenizer, hash)) WITHOUT ROWID;
             INSERT INTO tokens VALUES ('a', 'o200k_base', -1, 4), ('a', 'o200k_base', 3, 5),
                 ('b', 'o200k_base', 3, 6), ('a', 'cl100k_base', 3, 7);",
        )
        .unwrap();
        migrate_rows(&conn).unwrap();
        let mut a = load(&conn, "a", "o200k_base").unwrap();
        a.sort();
        assert_eq!(a, [(3, 5), (u64::MAX, 4)]);
        assert_eq!(load(&conn, "b", "o200k_base").unwrap(), [(3, 6)]);
        assert_eq!(load(&conn, "a", "cl100k_base").unwrap(), [(3, 7)]);
        let chunks: i64 = conn
            .query_row("SELECT COUNT(*) FROM token_chunks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(chunks, 3);
        let tokens_left: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'tokens'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tokens_left, 0);
        // Run again (another process raced the migration): nothing changes.
        migrate_rows(&conn).unwrap();
        assert_eq!(load(&conn, "b", "o200k_base").unwrap(), [(3, 6)]);
    }
}
