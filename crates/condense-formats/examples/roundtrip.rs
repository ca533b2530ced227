//! Reads a conversation file and writes it back unchanged to stdout.
//! `cargo run -p condense-formats --example roundtrip -- FILE [FORMAT] [SELECT]`

use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        return Err("usage: roundtrip FILE [FORMAT] [SELECT]".into());
    };
    let bytes = std::fs::read(path)?;
    let opts = condense_formats::ReadOptions {
        format: args
            .get(1)
            .filter(|f| !f.is_empty())
            .map(|f| f.parse())
            .transpose()?,
        select: args.get(2).cloned(),
    };
    let doc = condense_formats::read(&bytes, path, &opts)?;
    eprintln!(
        "{}: {} conversation(s)",
        doc.format(),
        doc.conversations().len()
    );
    std::io::stdout().write_all(&doc.write()?)?;
    Ok(())
}
