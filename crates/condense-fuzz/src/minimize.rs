//! Shrinks a failing input while it still fails the same way: whole lines first, then
//! elements and members of JSON containers, then bytes, within a budget of attempts (each
//! attempt of a binary target is two process runs).

use crate::spans;

/// The smallest input found for which `fails` still holds, in at most `budget` calls.
pub fn minimize(input: &[u8], budget: usize, mut fails: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
    let mut best = input.to_vec();
    let mut left = budget;
    let mut attempt = |candidate: &[u8], left: &mut usize| -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        fails(candidate)
    };
    // 1. Chunks of lines, halving (ddmin).
    let mut parts = 2;
    loop {
        let lines: Vec<&[u8]> = best.split_inclusive(|&b| b == b'\n').collect();
        if lines.len() < 2 || parts > lines.len() || left == 0 {
            break;
        }
        let size = lines.len().div_ceil(parts);
        let mut reduced = false;
        for start in (0..lines.len()).step_by(size) {
            let candidate: Vec<u8> = lines[..start]
                .iter()
                .chain(lines[(start + size).min(lines.len())..].iter())
                .flat_map(|l| l.iter().copied())
                .collect();
            if attempt(&candidate, &mut left) {
                best = candidate;
                reduced = true;
                break;
            }
        }
        if reduced {
            parts = (parts - 1).max(2);
        } else {
            parts *= 2;
        }
    }
    // 2. Container elements and members, biggest first, until none can go.
    'outer: while left > 0 {
        let nodes = spans::scan(&best);
        let mut cuts: Vec<(usize, usize)> = Vec::new();
        for n in &nodes {
            let kids = &n.children;
            for i in 0..kids.len() {
                cuts.push(if i + 1 < kids.len() {
                    (kids[i].0, kids[i + 1].0)
                } else if i > 0 {
                    (kids[i - 1].1, kids[i].1)
                } else {
                    kids[i]
                });
            }
        }
        cuts.sort_by_key(|(s, e)| std::cmp::Reverse(e - s));
        for (s, e) in cuts {
            let mut candidate = best[..s].to_vec();
            candidate.extend_from_slice(&best[e..]);
            if attempt(&candidate, &mut left) {
                best = candidate;
                continue 'outer;
            }
            if left == 0 {
                break 'outer;
            }
        }
        break;
    }
    // 3. Byte ranges, halving.
    let mut size = best.len() / 2;
    while size > 0 && left > 0 {
        let mut start = 0;
        while start < best.len() && left > 0 {
            let end = (start + size).min(best.len());
            let mut candidate = best[..start].to_vec();
            candidate.extend_from_slice(&best[end..]);
            if attempt(&candidate, &mut left) {
                best = candidate;
            } else {
                start += size;
            }
        }
        size /= 2;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::minimize;

    #[test]
    fn keeps_only_what_makes_it_fail() {
        let input = b"{\"a\": [1, 2, {\"bad\": 3}, 4]}\nline two\nline three\n";
        let small = minimize(input, 10_000, |c| c.windows(5).any(|w| w == b"\"bad\""));
        assert_eq!(small, b"\"bad\"");
    }
}
