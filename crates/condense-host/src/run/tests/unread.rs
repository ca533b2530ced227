//! Input messages a reader left unread ([`ReadFrom::unread`]): a resumed run whose start stands
//! for them never reads them; any other run reads them first, and gives what it gives for the
//! input read whole.

use super::*;
use std::cell::Cell;

/// `run` handed what a reader of `input` that left the messages `unread` marks unread tells
/// (every fingerprint, and the read of the whole input, failing when `fails`); what it gave and
/// how many times it read the whole input.
fn reading<T>(
    input: &Conversation,
    unread: &[bool],
    fails: bool,
    run: impl FnOnce(&ReadFrom<'_>) -> T,
) -> (T, usize) {
    let prints: Vec<u128> = input
        .messages
        .iter()
        .map(condense_model::fingerprint::fingerprint)
        .collect();
    let reads = Cell::new(0);
    let read_all = || {
        reads.set(reads.get() + 1);
        if fails {
            Err("the file changed".to_string())
        } else {
            Ok(input.clone())
        }
    };
    let texts = |_: &Message, _: usize| None;
    let read = ReadFrom {
        texts: &texts,
        fingerprints: Some(&prints),
        unread: Some(Unread {
            mask: unread,
            read_all: &read_all,
        }),
        lists_known: true,
    };
    let out = run(&read);
    (out, reads.get())
}

/// `input` with the messages `unread` marks as placeholders, as a reader leaves them.
fn with_placeholders(input: &Conversation, unread: &[bool]) -> Conversation {
    let mut partial = input.clone();
    for (i, m) in partial.messages.iter_mut().enumerate() {
        if unread[i] {
            *m = Message::new(format!("#{i}"), Role::User, vec![]);
        }
    }
    partial
}

/// The run of `input` (with `unread` placeholders) after a first run over `conversation()` on
/// `store`, the number of times it read the unread messages, and the same run over `input`
/// read whole on a store of its own.
fn second_run(
    loaded: &LoadedPipeline,
    unread: &[bool],
    first: bool,
    read_fails: bool,
) -> (Result<RunResult, HostError>, usize, RunResult) {
    let input = with_turn(conversation(), 2);
    let (got, reads) = reading(&input, unread, read_fails, |read| {
        let (_dir, st) = store();
        if first {
            loaded.run(conversation(), &st, "s", &resuming()).unwrap();
        }
        let partial = with_placeholders(&input, unread);
        loaded.run_with_texts(partial, &st, "s", &resuming(), read)
    });
    let (dir, st) = store();
    if first {
        loaded.run(conversation(), &st, "s", &resuming()).unwrap();
    }
    let reference = loaded.run(input, &st, "s", &resuming()).unwrap();
    drop(dir);
    (got, reads, reference)
}

#[test]
fn unread_messages_the_resumed_start_stands_for_are_never_read() {
    let loaded = pipeline(&[("cut", "shrink", "fail")]);
    // The first run cut the tool result (message 2): its output keeps messages 0 and 1 as
    // they were and stands for message 2 with the cut one.
    let unread = [false, false, true, false, false, false];
    let (got, reads, reference) = second_run(&loaded, &unread, true, false);
    let got = got.unwrap();
    assert_eq!(reads, 0);
    assert_eq!(got.conversation, reference.conversation);
    assert_eq!(got.tokens_before, reference.tokens_before);
    let resumed = got.resumed.expect("resumed");
    assert_eq!(resumed.unread_messages, 1);
    assert_eq!(
        Some(resumed.input_messages),
        reference.resumed.map(|r| r.input_messages)
    );
}

#[test]
fn unread_messages_are_read_first_when_the_run_needs_them() {
    let loaded = pipeline(&[("cut", "shrink", "fail")]);
    // Message 0 is one the first output keeps: the start needs it.
    let kept = [true, false, false, false, false, false];
    // Message 4 is new since the first run: the stages see it.
    let new = [false, false, false, false, true, false];
    for (unread, first) in [
        (&kept, true),
        (&new, true),
        (&[false, false, true, false, false, false], false),
    ] {
        let (got, reads, reference) = second_run(&loaded, unread, first, false);
        let got = got.unwrap();
        assert_eq!(reads, 1, "{unread:?}, first run: {first}");
        assert_eq!(got.conversation, reference.conversation);
        assert_eq!(got.resumed, reference.resumed);
        assert!(got.resumed.is_none_or(|r| r.unread_messages == 0));
    }
    // Reading them failed: the run fails in one line, naming the reread.
    let (got, _, _) = second_run(&loaded, &kept, true, true);
    let err = got.unwrap_err().to_string();
    assert_eq!(err, "the input, read again whole: the file changed");
}

#[test]
fn a_long_lived_pipeline_takes_the_messages_its_last_output_kept_from_memory() {
    let stages = [("cut", "shrink", "fail")];
    let (kept, plain) = (pipeline(&stages).keeping_points(), pipeline(&stages));
    let input = with_turn(conversation(), 2);
    // Every message the first run covered is unread, those its output kept included.
    let unread = [true, true, true, false, false, false];
    let partial = with_placeholders(&input, &unread);
    let ((_dir, st), (_other_dir, other)) = (store(), store());
    let first = kept.run(conversation(), &st, "s", &resuming()).unwrap();
    plain.run(conversation(), &other, "s", &resuming()).unwrap();
    let reference = plain.run(input.clone(), &other, "s", &resuming()).unwrap();

    // Until the caller hands the first output back, the point in memory has no messages:
    // the kept ones are read, the stored ones read back from the store.
    let (_waiting_dir, waiting) = store();
    kept.run(conversation(), &waiting, "s", &resuming())
        .unwrap();
    let (not_handed, reads) = reading(&input, &unread, false, |read| {
        kept.run_with_texts(partial.clone(), &waiting, "s", &resuming(), read)
    });
    assert_eq!(reads, 1, "nothing handed back: the kept messages are read");
    assert_eq!(not_handed.unwrap().conversation, reference.conversation);

    kept.keep_output(&st, "s", first.conversation);
    let (from_memory, reads) = reading(&input, &unread, false, |read| {
        kept.run_with_texts(partial.clone(), &st, "s", &resuming(), read)
    });
    let from_memory = from_memory.unwrap();
    assert_eq!(reads, 0, "the kept messages came from memory");
    assert_eq!(from_memory.conversation, reference.conversation);
    assert_eq!(from_memory.resumed.map(|r| r.unread_messages), Some(3));

    // A pipeline that keeps no points in memory reads them, when the reader of the run before
    // did not keep the list for a later read (`lists_known`)...
    let (_third_dir, third) = store();
    plain.run(conversation(), &third, "s", &resuming()).unwrap();
    let (from_store, reads) = reading(&input, &unread, false, |read| {
        plain.run_with_texts(partial.clone(), &third, "s", &resuming(), read)
    });
    assert_eq!(reads, 1);
    assert_eq!(from_store.unwrap().conversation, reference.conversation);
    // ... and when it did, takes them from the point's packs.
    let (_fourth_dir, fourth) = store();
    let none = vec![false; conversation().messages.len()];
    let (first_run, _) = reading(&conversation(), &none, false, |read| {
        plain.run_with_texts(conversation(), &fourth, "s", &resuming(), read)
    });
    first_run.unwrap();
    let (from_packs, reads) = reading(&input, &unread, false, |read| {
        plain.run_with_texts(partial.clone(), &fourth, "s", &resuming(), read)
    });
    assert_eq!(reads, 0, "the kept messages came from the packs");
    let from_packs = from_packs.unwrap();
    assert_eq!(from_packs.conversation, reference.conversation);
    assert_eq!(from_packs.resumed.map(|r| r.unread_messages), Some(3));
    // A pack gone: the run does not resume from the point, and reads them.
    let namespace = "resume-blocks-s";
    for (name, _) in fourth.records(namespace).unwrap() {
        if name.starts_with('p') {
            fourth.record_remove(namespace, &name).unwrap();
        }
    }
    let (without, reads) = reading(&input, &unread, false, |read| {
        plain.run_with_texts(partial, &fourth, "s", &resuming(), read)
    });
    assert_eq!(reads, 1);
    let without = without.unwrap();
    assert!(without.resumed.is_none());
    assert_eq!(without.conversation, reference.conversation);
}
