//! A client that moves its prompt-cache marks every turn (`cache_control` on its newest
//! message) still resumes from its previous output when that output kept the message that
//! lost its mark as it was ([`crate::resume`]'s `marks`): the output holds the input's marks
//! and no stale one, is what a run over the whole input makes, and expands to the input. When
//! a stage changed that message, the stages change it again from the input; when an archive
//! entry is anchored to it, the run goes over the whole input, and expands to it just the same.

use super::*;
use condense_model::{RawJson, TextBlock};

const MARK: &str = r#"{"cache_control":{"type":"ephemeral"}}"#;

/// A user message `id` whose text block is marked when `marked`.
fn asking(id: &str, marked: bool) -> Message {
    let text = TextBlock {
        text: format!("and what about {id}?"),
        extra: RawJson::from_string_unchecked(if marked { MARK } else { "" }.into()),
    };
    Message::new(
        id,
        Role::User,
        vec![Block::Text(text), Block::text("thanks")],
    )
}

/// How many blocks of `conv` carry a mark.
fn marks(conv: &Conversation) -> usize {
    conv.messages
        .iter()
        .flat_map(|m| &m.content.blocks)
        .filter(|b| is_marked(b))
        .count()
}

fn is_marked(block: &Block) -> bool {
    block.extra().is_some_and(|e| e.as_str() == MARK)
}

/// Turn `n`: the previous turn with its mark taken off, a new exchange, and a new question
/// marked (a client marking its newest message).
fn next_turn(previous: &Conversation, n: usize) -> Conversation {
    let mut conv = previous.clone();
    for m in &mut conv.messages {
        for extra in m.content.blocks.iter_mut().filter_map(Block::extra_mut) {
            *extra = RawJson::default();
        }
    }
    let mut conv = with_turn(conv, n);
    conv.messages.push(asking(&format!("q{n}"), true));
    conv
}

#[test]
fn a_moved_mark_resumes_and_the_output_holds_the_inputs_marks() {
    for loaded in [
        pipeline(&[("cut", "shrink", "fail")]),
        pipeline(&[("cut", "shrink", "fail")]).keeping_points(),
    ] {
        let (_dir, st) = store();
        let mut input = conversation();
        input.messages.push(asking("q1", true));
        let first = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
        loaded.keep_output(&st, "s", first.conversation);
        for n in 2..5 {
            input = next_turn(&input, n);
            let run = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
            let resumed = run.resumed.clone().expect("the turn resumes");
            assert_eq!(resumed.input_messages, input.messages.len() - 4, "turn {n}");
            // The last turn's question as the input has it now, unmarked; the new one marked.
            assert_eq!(marks(&run.conversation), 1, "turn {n}");
            is_the_whole_runs_and_expands(&loaded, &run, (&st, &input));
            // As `condense serve` does: the next turn takes the kept messages from memory.
            loaded.keep_output(&st, "s", run.conversation);
        }
    }
}

/// The message that lost its mark is one a stage changed (a tool result `shrink` cut): the
/// start takes it from the input as it is now and the stage cuts it again. The output is the
/// whole input's, with no stale mark, named by its own keys, and expands to the input.
#[test]
fn a_moved_mark_on_a_message_a_stage_changed_is_changed_again() {
    let result_mark = |conv: &mut Conversation, marked: bool| {
        if let Some(Block::ToolResult(r)) = conv.messages[2].content.blocks.first_mut() {
            let extra = if marked { MARK } else { "" };
            r.extra = RawJson::from_string_unchecked(extra.into());
        }
    };
    let stages = [("cut", "shrink", "fail")];
    for loaded in [pipeline(&stages), pipeline(&stages).keeping_points()] {
        let (_dir, st) = store();
        let mut first = conversation();
        result_mark(&mut first, true);
        let run = loaded.run(first.clone(), &st, "s", &resuming()).unwrap();
        loaded.keep_output(&st, "s", run.conversation);
        let mut second = first.clone();
        result_mark(&mut second, false);
        let mut second = with_turn(second, 2);
        second.messages.push(asking("q2", true));
        let run = loaded.run(second.clone(), &st, "s", &resuming()).unwrap();
        assert_eq!(run.resumed.as_ref().map(|r| r.input_messages), Some(3));
        is_the_whole_runs_and_expands(&loaded, &run, (&st, &second));
    }
}

/// `drop` removes every message but the last 3 and anchors them to the first it keeps: when
/// that one's mark moves, its old form keys the entry, so the turn runs whole; a mark moving
/// on another kept message resumes.
#[test]
fn a_moved_mark_on_a_message_an_entry_is_anchored_to_runs_whole() {
    let loaded = pipeline(&[("drop", "drop", "fail")]);
    let question = |marked: &[usize]| {
        let mut conv = conversation();
        conv.messages
            .extend((0..4).map(|i| asking(&format!("q{i}"), marked.contains(&i))));
        conv
    };
    // 7 messages, the last 3 kept: q1 (the anchor), q2, q3.
    for (first, then, resumes) in [
        (&[1][..], &[][..], false),
        (&[2], &[], true),
        (&[3], &[2], true),
    ] {
        let (_dir, st) = store();
        let run = loaded.run(question(first), &st, "s", &resuming()).unwrap();
        assert_eq!(run.conversation.messages.len(), 3);
        let mut second = question(then);
        second.messages.push(asking("q4", true));
        let run = loaded.run(second.clone(), &st, "s", &resuming()).unwrap();
        assert_eq!(
            run.resumed.is_some(),
            resumes,
            "marked {first:?}, then {then:?}"
        );
        expands_to(&st, &run.conversation, &second);
    }
}

/// `conv` with the last block of the messages at `marked` marked, and no other mark.
fn marked_at(mut conv: Conversation, marked: &[usize]) -> Conversation {
    for (i, m) in conv.messages.iter_mut().enumerate() {
        let mark = if marked.contains(&i) { MARK } else { "" };
        if let Some(extra) = m.content.blocks.last_mut().and_then(Block::extra_mut) {
            *extra = RawJson::from_string_unchecked(mark.into());
        }
    }
    conv
}

/// Sessions whose client moves its marks at random, mostly over its newest messages and now
/// and then to an old one, under pipelines that cut results, replace them in place,
/// deduplicate them, fold old messages into a summary or drop them, with and without serve's
/// memory: every turn expands
/// to its input exactly, and the output carries no mark the input does not (a stage's change
/// of a message kept with the mark it had when it was made would).
#[test]
fn marks_moved_at_random_never_lose_a_byte_nor_leave_a_stale_mark() {
    let mut rng = Lcg(0x2545_f491_4f6c_dd1d);
    let mut below = |n: usize| rng.below(n);
    let mut resumed_with_moved_marks = 0;
    for session in 0..36 {
        let loaded = random_pipeline(session);
        let (_dir, st) = store();
        let mut plain = conversation();
        let mut before: Vec<usize> = Vec::new();
        for turn in 2..8 {
            plain = with_turn(plain, turn);
            let n = plain.messages.len();
            let mut marks: Vec<usize> = (0..1 + below(2)).map(|_| n - 1 - below(4)).collect();
            if below(5) == 0 {
                marks.push(below(n));
            }
            let input = marked_at(plain.clone(), &marks);
            let run = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
            let moved = before.iter().any(|i| !marks.contains(i));
            if run.resumed.is_some() && moved {
                resumed_with_moved_marks += 1;
            }
            let what = format!("session {session} turn {turn}, marks {before:?} -> {marks:?}");
            let mut restored = run.conversation.clone();
            crate::expand(&st, "s", &mut restored).unwrap();
            assert!(restored == input, "{what}: does not expand to its input");
            for m in &run.conversation.messages {
                let marked = |m: &Message| m.content.blocks.iter().any(is_marked);
                if marked(m) {
                    let sent = input.messages.iter().find(|i| i.id == m.id);
                    assert!(
                        sent.is_some_and(marked),
                        "{what}: {} marked, not in the input",
                        m.id
                    );
                }
            }
            loaded.keep_output(&st, "s", run.conversation);
            before = marks;
        }
    }
    // Most turns moved a mark, and most of those still resumed.
    assert!(resumed_with_moved_marks > 60, "{resumed_with_moved_marks}");
}
