//! The messages a resume point's output holds, put together from the stored ones, the input
//! messages it kept (moved out of the input, not copied) and those a long-lived pipeline
//! remembered; and an output taken apart again into those, for a point kept in memory.

use super::InputsKept;
use condense_model::Message;

/// Where [`output_of`] moved input messages: (index in the input, place in the output).
pub(super) type Moved = Vec<(usize, usize)>;

/// The output messages a point keeps as `output` and `layout`, its references taken from
/// `kept` or `covered` (the input messages the point covers, unchanged since: same hash), and
/// which of `covered` went where ([`put_back`]). The messages taken from `covered` are moved
/// out of it, not copied (a message the output holds twice is moved once, then copied).
/// `None`, `covered` untouched, when they do not add up (not written by this code): then no
/// resuming.
pub(super) fn output_of(
    output: Vec<Message>,
    layout: &[i64],
    covered: &mut [Message],
    mut kept: InputsKept,
) -> Option<(Vec<Message>, Moved)> {
    enum From {
        Stored,
        Kept(usize),
        Covered(usize),
        /// The same input message as the output message at this place.
        Again(usize),
    }
    // Every place checked before anything is moved. `placed`: where each input message went
    // first, by its index (kept ones may lie past the covered messages).
    let size = kept.keys().map(|&i| i + 1).fold(covered.len(), usize::max);
    let mut placed: Vec<Option<usize>> = vec![None; size];
    let mut plan = Vec::with_capacity(layout.len());
    for (pos, &at) in layout.iter().enumerate() {
        plan.push(match at {
            -1 => From::Stored,
            i => {
                let i = usize::try_from(i).ok().filter(|&i| i < size)?;
                match placed[i] {
                    Some(first) => From::Again(first),
                    None if kept.contains_key(&i) => From::Kept(i),
                    None if i < covered.len() => From::Covered(i),
                    None => return None,
                }
            }
        });
        if let Some(slot) = usize::try_from(at).ok().and_then(|i| placed.get_mut(i)) {
            slot.get_or_insert(pos);
        }
    }
    if plan.iter().filter(|f| matches!(f, From::Stored)).count() != output.len() {
        return None;
    }
    let mut stored = output.into_iter();
    let mut messages: Vec<Message> = Vec::with_capacity(plan.len());
    let mut moved = Vec::new();
    for from in plan {
        let message = match from {
            From::Stored => stored.next(),
            From::Kept(i) => kept.remove(&i),
            From::Covered(i) => {
                moved.push((i, messages.len()));
                covered.get_mut(i).map(|m| std::mem::replace(m, hole()))
            }
            From::Again(first) => messages.get(first).cloned(),
        };
        // Every place was checked above: each `From` names a message that is there.
        messages.push(message.unwrap_or_else(hole));
    }
    Some((messages, moved))
}

/// Moves each input message `(at, i)` names out of `covered` into `output` at `at`, in place of
/// what the output held there, and notes it in `moved` ([`put_back`] puts it back). A message
/// named twice is moved once, then copied.
pub(super) fn take_inputs(
    output: &mut [Message],
    covered: &mut [Message],
    places: &[(usize, usize)],
    moved: &mut Moved,
) {
    for &(at, i) in places {
        if at >= output.len() {
            continue;
        }
        let first = moved.iter().find(|&&(j, _)| j == i).map(|&(_, pos)| pos);
        let message = match first {
            Some(pos) => output.get(pos).cloned(),
            None => covered.get_mut(i).map(|m| std::mem::replace(m, hole())),
        };
        if let (Some(message), Some(slot)) = (message, output.get_mut(at)) {
            if first.is_none() {
                moved.push((i, at));
            }
            *slot = message;
        }
    }
}

/// What a message moved out of a list leaves behind: an empty event, made without allocating.
fn hole() -> Message {
    Message::new(String::new(), condense_model::Role::Event, Vec::new())
}

/// Puts the messages [`output_of`] moved out of `covered` back from `output`.
pub(super) fn put_back(
    covered: &mut [Message],
    mut output: Vec<Message>,
    moved: &[(usize, usize)],
) {
    for &(i, pos) in moved {
        if let (Some(slot), Some(m)) = (covered.get_mut(i), output.get_mut(pos)) {
            *slot = std::mem::replace(m, hole());
        }
    }
}

/// The inverse of [`output_of`], for a point kept in memory: `output` taken apart as `layout`
/// says, into the input messages it kept (by index) and the messages it stored with their
/// fingerprints (`prints`, in order). `None` when they do not add up.
pub(super) fn split_output(
    layout: &[i64],
    prints: Vec<u128>,
    output: condense_model::Conversation,
) -> Option<(InputsKept, Vec<(u128, Message)>)> {
    if layout.len() != output.messages.len() {
        return None;
    }
    let mut prints = prints.into_iter();
    let (mut kept, mut stored) = (InputsKept::new(), Vec::new());
    for (&at, message) in layout.iter().zip(output.messages) {
        match usize::try_from(at) {
            Ok(index) => {
                kept.insert(index, message);
            }
            Err(_) => stored.push((prints.next()?, message)),
        }
    }
    prints.next().is_none().then_some((kept, stored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_model::{Block, Role};

    fn message(id: &str, text: &str) -> Message {
        Message::new(id, Role::User, vec![Block::text(text)])
    }

    #[test]
    fn a_points_output_moves_what_it_keeps_and_puts_it_back_whole() {
        let input: Vec<Message> = (0..5).map(|i| message(&format!("#{i}"), "same")).collect();
        let stored = vec![message("collapse-0", "summary")];
        let kept = InputsKept::from([(4, message("#4", "remembered"))]);
        // A summary, input 1, input 1 again (two equal messages), input 3, the remembered 4.
        let layout = [-1, 1, 1, 3, 4];
        let mut covered = input.clone();
        let (output, moved) = output_of(stored.clone(), &layout, &mut covered, kept).unwrap();
        let expected = [
            stored[0].clone(),
            input[1].clone(),
            input[1].clone(),
            input[3].clone(),
            message("#4", "remembered"),
        ];
        assert_eq!(output, expected);
        assert_eq!(moved, [(1, 1), (3, 3)]);
        assert!(covered[1].id.is_empty() && covered[3].id.is_empty());
        put_back(&mut covered, output, &moved);
        assert_eq!(covered, input);
        // What does not add up takes nothing: a missing index, too few or too many stored.
        for (layout, stored) in [
            (&[1, 9][..], vec![]),
            (&[-1, 1][..], vec![]),
            (&[1][..], stored.clone()),
            (&[-2][..], vec![]),
        ] {
            let mut covered = input.clone();
            assert!(output_of(stored, layout, &mut covered, InputsKept::new()).is_none());
            assert_eq!(covered, input);
        }
    }

    /// Input messages taken into an output in place of what it held there (a stage's change
    /// of them) are moved once, copied where named again, and put back whole.
    #[test]
    fn inputs_taken_into_an_output_are_moved_once_and_put_back() {
        let input: Vec<Message> = (0..4)
            .map(|i| message(&format!("#{i}"), "as sent"))
            .collect();
        let stored = vec![
            message("#1", "cut"),
            message("#1", "cut"),
            message("#3", "cut"),
        ];
        let layout = [0, -1, -1, -1];
        let mut covered = input.clone();
        let (mut output, mut moved) =
            output_of(stored, &layout, &mut covered, InputsKept::new()).unwrap();
        take_inputs(
            &mut output,
            &mut covered,
            &[(1, 1), (2, 1), (3, 3), (9, 2)],
            &mut moved,
        );
        let expected = [&input[0], &input[1], &input[1], &input[3]];
        assert_eq!(output.iter().collect::<Vec<_>>(), expected);
        assert_eq!(moved, [(0, 0), (1, 1), (3, 3)]);
        // A place past the output takes nothing.
        assert_eq!(covered[2], input[2]);
        put_back(&mut covered, output, &moved);
        assert_eq!(covered, input);
    }

    /// An output handed back to a point in memory splits as its layout says: input messages
    /// kept by index, stored ones with their fingerprints in order; what does not add up (another
    /// length, too few or too many fingerprints) gives nothing.
    #[test]
    fn an_output_handed_back_splits_into_kept_and_stored_as_its_layout_says() {
        let output = |n: usize| condense_model::Conversation {
            messages: (0..n).map(|i| message(&format!("m{i}"), "x")).collect(),
            ..Default::default()
        };
        let (kept, stored) = split_output(&[-1, 4, -1, 7], vec![10, 20], output(4)).unwrap();
        assert_eq!(kept.keys().copied().collect::<Vec<_>>(), [4, 7]);
        assert_eq!(kept[&4].id, "m1");
        let stored: Vec<(u128, &str)> = stored.iter().map(|(fp, m)| (*fp, m.id.as_str())).collect();
        assert_eq!(stored, [(10, "m0"), (20, "m2")]);
        assert!(split_output(&[-1, 4], vec![10], output(3)).is_none());
        assert!(split_output(&[-1, -1], vec![10], output(2)).is_none());
        assert!(split_output(&[-1, 4], vec![10, 20], output(2)).is_none());
    }
}
