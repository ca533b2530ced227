//! Times reading and writing a conversation file, unchanged and with one message changed (the
//! fastest of RUNS runs).
//! `cargo run -p condense-formats --example timing -- FILE [RUNS]`

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        return Err("usage: timing FILE [RUNS]".into());
    };
    let runs: u32 = args.get(1).map(|r| r.parse()).transpose()?.unwrap_or(5);
    let bytes = std::fs::read(path)?;
    let opts = condense_formats::ReadOptions::default();
    // The fastest of the runs: the least disturbed by other work on the machine.
    let (mut read, mut write, mut changed) = (f64::MAX, f64::MAX, f64::MAX);
    let mut exact = true;
    for _ in 0..runs {
        let t = Instant::now();
        let mut doc = condense_formats::read(&bytes, path, &opts)?;
        read = read.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        exact &= doc.write()? == bytes;
        write = write.min(t.elapsed().as_secs_f64());
        if let Some(msg) = doc.conversations_mut()[0].messages.last_mut() {
            msg.content = condense_model::Content::string("changed");
        }
        let t = Instant::now();
        doc.write()?;
        changed = changed.min(t.elapsed().as_secs_f64());
    }
    let ms = |s: f64| s * 1000.0;
    println!(
        "{path}: {} bytes, read {:.1} ms, write {:.1} ms, write with one message changed {:.1} ms, byte-exact {exact}",
        bytes.len(),
        ms(read),
        ms(write),
        ms(changed)
    );
    Ok(())
}
