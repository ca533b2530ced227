//! A client that edits its own history every turn (OpenHands masks observations older than
//! its window, SWE-agent elides old outputs, LangChain clears old tool results) still resumes
//! from its previous output where that output stands for each edited message alone
//! ([`crate::resume`]'s `inputs`): the output is what a run over the whole input makes, counts
//! the whole input, holds no stale form of an edited message, and expands to the input. Where
//! a stage folded an edited message into a summary, the run goes over the whole input and
//! expands to it just the same.

use super::*;

/// `conv` with the tool result at `at` masked, as OpenHands' observation masking does (with
/// `how` in the mask: each masking is an edit).
fn masked(mut conv: Conversation, at: usize, how: usize) -> Conversation {
    if let Some(Block::ToolResult(r)) = conv.messages[at].content.blocks.first_mut() {
        r.content = Content::string(format!("<MASKED {how}>"));
    }
    conv
}

/// `conv` with the text of the user request at `at` edited.
fn reworded(mut conv: Conversation, at: usize) -> Conversation {
    if let Some(Block::Text(t)) = conv.messages[at].content.blocks.first_mut() {
        t.text.push_str(" (reworded)");
    }
    conv
}

/// The user requests of `output` (text messages the input has by id) are the input's as it
/// is now: no stale form of one the client edited.
fn holds_no_stale_request(output: &Conversation, input: &Conversation, what: &str) {
    for m in &output.messages {
        let is_request = matches!(m.content.blocks.first(), Some(Block::Text(_)));
        if let Some(sent) = input.messages.iter().find(|i| i.id == m.id && is_request) {
            assert_eq!(m, sent, "{what}: {} is not the input's", m.id);
        }
    }
}

/// Twenty-five turns, each masking an old tool result and rewording an old request (past the
/// point's first block of 64 messages from turn 21 on): every turn resumes, takes the edited
/// messages from the input (the stage cuts the masked result again), and is the whole run's.
#[test]
fn old_messages_edited_every_turn_resume_and_make_the_whole_runs_output() {
    for stages in [
        &[("cut", "shrink", "fail")][..],
        &[("swap", "replace", "fail")],
    ] {
        for loaded in [pipeline(stages), pipeline(stages).keeping_points()] {
            let (_dir, st) = store();
            let mut input = conversation();
            let first = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
            loaded.keep_output(&st, "s", first.conversation);
            for n in 2..27 {
                let len = input.messages.len();
                // Turn k's request, call and result are at 3k-3, 3k-2, 3k-1 (k from 1).
                let old = (n * 7) % (len / 3);
                input = reworded(masked(input, 3 * old + 2, n), 3 * old);
                input = with_turn(input, n);
                let run = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
                let resumed = run.resumed.clone().expect("the turn resumes");
                assert_eq!(resumed.input_messages, len, "turn {n}");
                assert_eq!(resumed.edited_messages, 2, "turn {n}");
                is_the_whole_runs_and_expands(&loaded, &run, (&st, &input));
                holds_no_stale_request(&run.conversation, &input, &format!("turn {n}"));
                loaded.keep_output(&st, "s", run.conversation);
            }
        }
    }
}

/// `fold` keeps the last 3 messages and folds the rest into a summary: an edit to a folded
/// message runs whole (the summary was made of its old form), an edit to a kept one resumes.
#[test]
fn an_edit_to_a_message_folded_into_a_summary_runs_whole() {
    let loaded = pipeline(&[("fold", "fold", "fail")]);
    for (at, resumes) in [(0, false), (2, false), (4, true), (5, true)] {
        let (_dir, st) = store();
        let first = with_turn(conversation(), 2);
        loaded.run(first.clone(), &st, "s", &resuming()).unwrap();
        let edited = if at % 3 == 2 {
            masked(first, at, 0)
        } else {
            reworded(first, at)
        };
        let second = with_turn(edited, 3);
        let run = loaded.run(second.clone(), &st, "s", &resuming()).unwrap();
        assert_eq!(run.resumed.is_some(), resumes, "edited at {at}");
        let counted = loaded.counter.count_conversation(&second).total;
        assert_eq!(run.tokens_before, counted, "edited at {at}");
        expands_to(&st, &run.conversation, &second);
    }
}

/// Sessions whose client edits earlier messages at random (masks results, rewords requests,
/// none to three a turn; a new result now and then repeats an earlier one), under pipelines
/// that cut results, replace them in place, deduplicate them, fold old messages into a summary
/// or drop them, with and without serve's memory: every turn counts its whole input, expands
/// to it exactly, and holds no stale request. A deduplicating session's output is a whole
/// run's: a pointer never names a copy the client masked since.
#[test]
fn edits_at_random_never_lose_a_byte_nor_leave_a_stale_message() {
    let mut rng = Lcg(0x9e37_79b9_7f4a_7c15);
    let mut below = |n: usize| rng.below(n);
    let mut resumed_with_edits = 0;
    for session in 0..36 {
        let loaded = random_pipeline(session);
        let (_dir, st) = store();
        let mut input = conversation();
        for turn in 2..8 {
            let edits = below(4);
            for _ in 0..edits {
                let k = below(input.messages.len() / 3);
                input = if below(2) == 0 {
                    masked(input, 3 * k + 2, turn)
                } else {
                    reworded(input, 3 * k)
                };
            }
            input = with_turn(input, turn);
            // Now and then the new result repeats an earlier one (a file read again), which a
            // later turn may mask.
            if below(2) == 0 {
                let k = below(input.messages.len() / 3 - 1);
                let earlier = input.messages[3 * k + 2].content.blocks[0].clone();
                let last = input.messages.len() - 1;
                if let (Block::ToolResult(copy), Block::ToolResult(r)) =
                    (earlier, &mut input.messages[last].content.blocks[0])
                {
                    r.content = copy.content;
                }
            }
            let run = loaded.run(input.clone(), &st, "s", &resuming()).unwrap();
            let what = format!("session {session} turn {turn}, {edits} edits");
            if run.resumed.as_ref().is_some_and(|r| r.edited_messages > 0) {
                resumed_with_edits += 1;
            }
            // Cutting, replacing or deduplicating results in place, the output stands for
            // every message alone: every turn after the first resumes.
            if turn > 2 && matches!(session % RANDOM_PIPELINES.len(), 0 | 1 | 5) {
                assert!(run.resumed.is_some(), "{what}: did not resume");
            }
            let counted = loaded.counter.count_conversation(&input).total;
            assert_eq!(run.tokens_before, counted, "{what}");
            if session % RANDOM_PIPELINES.len() == 5 {
                let (_whole_dir, whole_store) = store();
                let whole = loaded.run(input.clone(), &whole_store, "s", &options());
                assert!(
                    whole.unwrap().conversation == run.conversation,
                    "{what}: not the whole run's"
                );
            }
            let mut restored = run.conversation.clone();
            crate::expand(&st, "s", &mut restored).unwrap();
            assert!(restored == input, "{what}: does not expand to its input");
            holds_no_stale_request(&run.conversation, &input, &what);
            loaded.keep_output(&st, "s", run.conversation);
        }
    }
    // About three turns in four edit something; those of a session that folds or drops old
    // messages resume only while they edit messages the output still holds.
    assert!(resumed_with_edits > 40, "{resumed_with_edits}");
}

/// snip kept the first copy of a result read twice and pointed the second at it; the client
/// then masks the first. The pointer leans on what the client edited: the start takes that
/// message from the input too, and the stage finds no duplicate now, as a run over the whole
/// input does (kept, the pointer would name a copy that is no longer there: the content lost).
#[test]
fn a_pointer_to_a_copy_the_client_masked_is_made_again() {
    let stages = [("dedup", "dedup", "fail")];
    for loaded in [pipeline(&stages), pipeline(&stages).keeping_points()] {
        let (_dir, st) = store();
        // The second turn's result repeats the first's.
        let mut first = with_turn(conversation(), 2);
        let repeated = first.messages[2].content.blocks[0].clone();
        if let (Block::ToolResult(copy), Block::ToolResult(r)) =
            (repeated, &mut first.messages[5].content.blocks[0])
        {
            r.content = copy.content;
        }
        let run = loaded.run(first.clone(), &st, "s", &resuming()).unwrap();
        let pointer = |conv: &Conversation| match &conv.messages[5].content.blocks[0] {
            Block::ToolResult(r) => condense_model::duplicate::pointed_to(&r.content.text())
                .map(|(_, id)| id.to_string()),
            _ => None,
        };
        assert_eq!(pointer(&run.conversation).as_deref(), Some("c1"));
        loaded.keep_output(&st, "s", run.conversation);
        let second = with_turn(masked(first, 2, 0), 3);
        let run = loaded.run(second.clone(), &st, "s", &resuming()).unwrap();
        let resumed = run.resumed.clone().expect("the turn resumes");
        assert_eq!(resumed.edited_messages, 1);
        assert_eq!(pointer(&run.conversation), None);
        is_the_whole_runs_and_expands(&loaded, &run, (&st, &second));
    }
}
