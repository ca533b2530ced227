//! Is this file a complete shared library for this platform? Checked before `dlopen`.
//!
//! The dynamic loader maps a library's segments straight from the file. When the file is cut
//! short (a copy interrupted, a disk full, a download stopped), the mapping reaches past the
//! end of the file and the first touch of a missing page kills the process with SIGBUS, before
//! any error can be printed. So before a library is handed to the loader, its headers are read
//! by hand and every extent they name (program headers, section headers, each loaded segment,
//! each section with contents) must lie within the file.
//!
//! Formats: ELF (Linux and the BSDs: magic, class, byte order, machine, type), Mach-O (macOS:
//! thin 32/64-bit and fat files; the header, load commands and every segment's file range), PE
//! (Windows: the `MZ` and `PE` headers and every section's raw data). Only headers are read,
//! never the whole file.
//!
//! On the way it reads what identifies the library's content: an ELF file's build id (the
//! linker's hash of what it linked, [`LibraryFile::build_id`]), which lets the loader skip
//! abi_stable's layout check for a library this host has checked before (`crate::checked`).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Why a file is not a loadable library. Displays as the reason part of one line.
#[derive(Debug, thiserror::Error)]
pub enum LibFileError {
    #[error("cannot read it: {0}")]
    Io(String),
    #[error("not a shared library (it is {0})")]
    NotALibrary(String),
    #[error("built for another platform ({found}; this condense runs on {expected})")]
    WrongPlatform { found: String, expected: String },
    #[error("truncated at {size} bytes ({what}: up to byte {end}); copy or build it again")]
    Truncated { size: u64, what: String, end: u64 },
    #[error("malformed headers: {0}")]
    Malformed(String),
}

/// Reads pieces of the file by offset, refusing any piece that does not lie within it.
struct Reader {
    file: File,
    size: u64,
}

impl Reader {
    fn bytes(&mut self, offset: u64, len: u64, what: &str) -> Result<Vec<u8>, LibFileError> {
        let end = within(self.size, offset, len, what)?;
        // Headers are small; a count that claims more than 16 MiB of headers is nonsense, and
        // refusing it keeps a hostile file from making us allocate the claimed size.
        if len > 16 << 20 {
            return Err(LibFileError::Malformed(format!("{what} claim {len} bytes")));
        }
        let mut buf = vec![0; (end - offset) as usize];
        self.file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| self.file.read_exact(&mut buf))
            .map_err(|e| LibFileError::Io(e.to_string()))?;
        Ok(buf)
    }
}

/// `offset + len`, when it lies within a file of `size` bytes.
fn within(size: u64, offset: u64, len: u64, what: &str) -> Result<u64, LibFileError> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| LibFileError::Malformed(format!("{what} overflow")))?;
    if end > size {
        return Err(LibFileError::Truncated {
            size,
            what: what.to_string(),
            end,
        });
    }
    Ok(end)
}

/// Little or big endian integer reads from a header buffer (bounds already checked by the
/// caller's `Reader::bytes`; a short buffer reads as 0, which later checks refuse).
#[derive(Clone, Copy)]
struct Endian {
    little: bool,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u64 {
        let Some(s) = b.get(at..at + 2) else { return 0 };
        let a = [s[0], s[1]];
        u64::from(if self.little {
            u16::from_le_bytes(a)
        } else {
            u16::from_be_bytes(a)
        })
    }
    fn u32(self, b: &[u8], at: usize) -> u64 {
        let Some(s) = b.get(at..at + 4) else { return 0 };
        let a = [s[0], s[1], s[2], s[3]];
        u64::from(if self.little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }
    fn u64(self, b: &[u8], at: usize) -> u64 {
        let Some(s) = b.get(at..at + 8) else { return 0 };
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        if self.little {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        }
    }
    /// A word of the file's class: 4 bytes in 32-bit files, 8 in 64-bit ones.
    fn word(self, wide: bool, b: &[u8], at: usize) -> u64 {
        if wide {
            self.u64(b, at)
        } else {
            self.u32(b, at)
        }
    }
}

const HOST_LITTLE: bool = cfg!(target_endian = "little");
const HOST_WIDE: bool = cfg!(target_pointer_width = "64");

/// What [`check_library`] learned about a library besides that it is complete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibraryFile {
    /// The linker's build id (the ELF note `NT_GNU_BUILD_ID`): a hash of the linked content,
    /// so two files with the same id hold the same code and data, whatever their paths and
    /// dates. `None` when the file has none (linked with `--build-id=none`) and on Mach-O and
    /// PE, where it is not read.
    pub build_id: Option<Vec<u8>>,
}

/// Checks that `path` is a complete shared library for this platform.
pub fn check_library(path: &Path) -> Result<LibraryFile, LibFileError> {
    let meta = std::fs::metadata(path).map_err(|e| LibFileError::Io(e.to_string()))?;
    if meta.is_dir() {
        return Err(LibFileError::NotALibrary("a directory".into()));
    }
    let file = File::open(path).map_err(|e| LibFileError::Io(e.to_string()))?;
    let mut r = Reader {
        file,
        size: meta.len(),
    };
    if r.size == 0 {
        return Err(LibFileError::NotALibrary("an empty file".into()));
    }
    let head = r.bytes(0, r.size.min(64), "header")?;
    if cfg!(target_os = "windows") {
        check_pe(&mut r, &head).map(|()| LibraryFile::default())
    } else if cfg!(target_vendor = "apple") {
        check_macho(&mut r, &head).map(|()| LibraryFile::default())
    } else {
        let phs = check_elf(&mut r, &head)?;
        Ok(LibraryFile {
            build_id: phs.build_id(&mut r),
        })
    }
}

/// The build id of the ELF file at `path` (an executable or a library; see
/// [`LibraryFile::build_id`]): `None` when it has none, cannot be read, or is not an ELF file
/// of this platform's byte order and width. The host reads its own with it.
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let file = File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut r = Reader { file, size };
    let head = r.bytes(0, size.min(64), "header").ok()?;
    let class = if HOST_WIDE { 2 } else { 1 };
    let order = if HOST_LITTLE { 1 } else { 2 };
    if !head.starts_with(b"\x7fELF") || head.get(4) != Some(&class) || head.get(5) != Some(&order) {
        return None;
    }
    ProgramHeaders::read(&mut r, &head).ok()?.build_id(&mut r)
}

/// The largest note segment read for a build id (real ones are a few hundred bytes).
const MAX_NOTES: u64 = 64 << 10;

/// The program headers of an ELF file of this platform's width and byte order (the caller has
/// checked both), read once for the checks and the build id.
struct ProgramHeaders {
    bytes: Vec<u8>,
    entry: usize,
}

impl ProgramHeaders {
    const E: Endian = Endian {
        little: HOST_LITTLE,
    };

    fn read(r: &mut Reader, head: &[u8]) -> Result<ProgramHeaders, LibFileError> {
        let e = Self::E;
        // Offsets of e_phoff, then e_phentsize and e_phnum, by class.
        let (phoff, sizes) = if HOST_WIDE { (32, 54) } else { (28, 42) };
        let phoff = e.word(HOST_WIDE, head, phoff);
        let entry = e.u16(head, sizes);
        let count = e.u16(head, sizes + 2);
        let min_entry = if HOST_WIDE { 56 } else { 32 };
        if count == 0 || entry < min_entry {
            return Err(LibFileError::Malformed("no program headers".into()));
        }
        Ok(ProgramHeaders {
            bytes: r.bytes(phoff, count * entry, "program headers")?,
            entry: entry as usize,
        })
    }

    /// Each header's `(p_type, p_offset, p_filesz, p_align)`.
    fn each(&self) -> impl Iterator<Item = (u64, u64, u64, u64)> + '_ {
        let e = Self::E;
        self.bytes.chunks_exact(self.entry).map(move |p| {
            if HOST_WIDE {
                (e.u32(p, 0), e.u64(p, 8), e.u64(p, 32), e.u64(p, 48))
            } else {
                (e.u32(p, 0), e.u32(p, 4), e.u32(p, 16), e.u32(p, 28))
            }
        })
    }

    /// `NT_GNU_BUILD_ID` in the file's note segments (`PT_NOTE`), if any.
    fn build_id(&self, r: &mut Reader) -> Option<Vec<u8>> {
        self.each()
            .filter(|&(kind, _, filesz, _)| kind == 4 && filesz <= MAX_NOTES)
            .find_map(|(_, offset, filesz, align)| {
                let notes = r.bytes(offset, filesz, "notes").ok()?;
                gnu_build_id(&notes, Self::E, if align == 8 { 8 } else { 4 })
            })
    }
}

/// The descriptor of the `GNU` note of type 3 (`NT_GNU_BUILD_ID`) among `notes`: each note is
/// `namesz`, `descsz`, `type`, then the name and the descriptor, each ending padded to `align`.
fn gnu_build_id(notes: &[u8], e: Endian, align: usize) -> Option<Vec<u8>> {
    let pad = |n: usize| n.checked_add(align - 1).map(|n| n / align * align);
    let mut at = 0usize;
    while at.checked_add(12)? <= notes.len() {
        let namesz = usize::try_from(e.u32(notes, at)).ok()?;
        let descsz = usize::try_from(e.u32(notes, at + 4)).ok()?;
        let kind = e.u32(notes, at + 8);
        let name_at = at + 12;
        // Offsets are padded from the segment's start, which is aligned.
        let desc_at = pad(name_at.checked_add(namesz)?)?;
        let next = pad(desc_at.checked_add(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == 3 && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc.to_vec());
        }
        at = next;
    }
    None
}

/// What a file's first bytes say it is, for the message when it is not what we expect.
fn describe(head: &[u8]) -> String {
    if head.starts_with(b"\x7fELF") {
        "an ELF file".into()
    } else if head.starts_with(b"MZ") {
        "a Windows (PE) file".into()
    } else if [
        [0xfe, 0xed, 0xfa, 0xce],
        [0xfe, 0xed, 0xfa, 0xcf],
        [0xce, 0xfa, 0xed, 0xfe],
        [0xcf, 0xfa, 0xed, 0xfe],
        [0xca, 0xfe, 0xba, 0xbe],
    ]
    .iter()
    .any(|m| head.starts_with(m))
    {
        "a Mach-O file".into()
    } else if head
        .iter()
        .all(|b| (b.is_ascii() && !b.is_ascii_control()) || b"\r\n\t".contains(b))
    {
        "a text file".into()
    } else {
        "not a recognised executable format".into()
    }
}

/// The ELF `e_machine` of this platform, when we know it.
fn elf_machine() -> Option<(u64, &'static str)> {
    let m = match std::env::consts::ARCH {
        "x86_64" => (62, "x86-64"),
        "x86" => (3, "x86"),
        "aarch64" => (183, "aarch64"),
        "arm" => (40, "arm"),
        "riscv64" | "riscv32" => (243, "risc-v"),
        "powerpc64" => (21, "powerpc64"),
        "powerpc" => (20, "powerpc"),
        "s390x" => (22, "s390x"),
        "loongarch64" => (258, "loongarch"),
        "mips" | "mips64" => (8, "mips"),
        "sparc64" => (43, "sparc64"),
        _ => return None,
    };
    Some(m)
}

fn check_elf(r: &mut Reader, head: &[u8]) -> Result<ProgramHeaders, LibFileError> {
    if !head.starts_with(b"\x7fELF") {
        return Err(LibFileError::NotALibrary(describe(head)));
    }
    if head.len() < 52 {
        return Err(LibFileError::Truncated {
            size: r.size,
            what: "ELF header".into(),
            end: 52,
        });
    }
    let wide = match head[4] {
        1 => false,
        2 => true,
        c => return Err(LibFileError::Malformed(format!("ELF class {c}"))),
    };
    let little = match head[5] {
        1 => true,
        2 => false,
        d => return Err(LibFileError::Malformed(format!("ELF byte order {d}"))),
    };
    let e = Endian { little };
    let machine = e.u16(head, 18);
    let platform = |wide: bool, little: bool, machine: String| {
        format!(
            "{}-bit {} {machine}",
            if wide { 64 } else { 32 },
            if little {
                "little-endian"
            } else {
                "big-endian"
            }
        )
    };
    let host_machine = elf_machine();
    let machine_ok = host_machine.is_none_or(|(m, _)| m == machine);
    if wide != HOST_WIDE || little != HOST_LITTLE || !machine_ok {
        return Err(LibFileError::WrongPlatform {
            found: platform(wide, little, format!("machine {machine}")),
            expected: platform(
                HOST_WIDE,
                HOST_LITTLE,
                host_machine.map_or_else(|| std::env::consts::ARCH.to_string(), |(_, n)| n.into()),
            ),
        });
    }
    // ET_DYN: shared objects (and position-independent executables, which dlopen refuses
    // with its own message).
    let kind = e.u16(head, 16);
    if kind != 3 {
        let what = match kind {
            1 => "an object file (.o), not a shared library".to_string(),
            2 => "an executable, not a shared library".to_string(),
            4 => "a core dump".to_string(),
            k => format!("ELF type {k}"),
        };
        return Err(LibFileError::NotALibrary(what));
    }
    let header_size = if wide { 64 } else { 52 };
    if (head.len() as u64) < header_size {
        return Err(LibFileError::Truncated {
            size: r.size,
            what: "ELF header".into(),
            end: header_size,
        });
    }
    // The width and byte order are this platform's (checked above).
    let phs = ProgramHeaders::read(r, head)?;
    for (i, (kind, offset, filesz, _)) in phs.each().enumerate() {
        // PT_LOAD: the loader maps [p_offset, p_offset + p_filesz) from the file.
        if kind == 1 {
            within(r.size, offset, filesz, &format!("loaded segment {i}"))?;
        }
    }

    // Offsets of e_shoff, then e_shentsize and e_shnum, by class.
    let (shoff, sizes) = if wide { (40, 58) } else { (32, 46) };
    let shoff = e.word(wide, head, shoff);
    let shentsize = e.u16(head, sizes);
    let mut shnum = e.u16(head, sizes + 2);
    if shoff == 0 {
        return Ok(phs);
    }
    let min_sh = if wide { 64 } else { 40 };
    if shentsize < min_sh {
        return Err(LibFileError::Malformed("section header size".into()));
    }
    if shnum == 0 {
        // More than 0xff00 sections: the real count is section 0's sh_size.
        let first = r.bytes(shoff, shentsize, "section headers")?;
        shnum = e.word(wide, &first, if wide { 32 } else { 20 });
    }
    let shs = r.bytes(shoff, shnum * shentsize, "section headers")?;
    for i in 0..shnum as usize {
        let s = &shs[i * shentsize as usize..];
        // SHT_NOBITS (.bss) occupies no file space.
        if e.u32(s, 4) == 8 {
            continue;
        }
        let (offset, size) = if wide {
            (e.u64(s, 24), e.u64(s, 32))
        } else {
            (e.u32(s, 16), e.u32(s, 20))
        };
        within(r.size, offset, size, &format!("section {i}"))?;
    }
    Ok(phs)
}

fn check_macho(r: &mut Reader, head: &[u8]) -> Result<(), LibFileError> {
    let magic = head.get(..4).unwrap_or_default();
    if magic == [0xca, 0xfe, 0xba, 0xbe] {
        // A fat (universal) file: a big-endian table of (cputype, subtype, offset, size, align);
        // each architecture's slice must lie within the file, and is checked as a thin file.
        let e = Endian { little: false };
        let n = e.u32(head, 4);
        let table = r.bytes(8, n * 20, "universal binary table")?;
        for i in 0..n as usize {
            let offset = e.u32(&table, i * 20 + 8);
            let size = e.u32(&table, i * 20 + 12);
            within(r.size, offset, size, &format!("architecture slice {i}"))?;
            let slice_head = r.bytes(offset, size.min(32), "architecture header")?;
            check_thin_macho(r, &slice_head, offset)?;
        }
        return Ok(());
    }
    check_thin_macho(r, head, 0)
}

fn check_thin_macho(r: &mut Reader, head: &[u8], base: u64) -> Result<(), LibFileError> {
    let (wide, little) = match head.get(..4).unwrap_or_default() {
        [0xfe, 0xed, 0xfa, 0xce] => (false, false),
        [0xfe, 0xed, 0xfa, 0xcf] => (true, false),
        [0xce, 0xfa, 0xed, 0xfe] => (false, true),
        [0xcf, 0xfa, 0xed, 0xfe] => (true, true),
        _ => return Err(LibFileError::NotALibrary(describe(head))),
    };
    let e = Endian { little };
    // MH_DYLIB (6) or MH_BUNDLE (8): what dlopen takes.
    let filetype = e.u32(head, 12);
    if filetype != 6 && filetype != 8 {
        return Err(LibFileError::NotALibrary(format!(
            "a Mach-O file of type {filetype}, not a dylib"
        )));
    }
    let ncmds = e.u32(head, 16);
    let sizeofcmds = e.u32(head, 20);
    let header = if wide { 32 } else { 28 };
    let cmds = r.bytes(base + header, sizeofcmds, "load commands")?;
    let mut at = 0usize;
    for i in 0..ncmds {
        let cmd = e.u32(&cmds, at);
        let size = e.u32(&cmds, at + 4) as usize;
        if size < 8 || at + size > cmds.len() {
            return Err(LibFileError::Malformed(format!("load command {i}")));
        }
        // LC_SEGMENT (1) / LC_SEGMENT_64 (0x19): fileoff and filesize are mapped.
        let range = match cmd {
            0x19 => Some((e.u64(&cmds, at + 40), e.u64(&cmds, at + 48))),
            1 => Some((e.u32(&cmds, at + 32), e.u32(&cmds, at + 36))),
            _ => None,
        };
        if let Some((off, len)) = range {
            within(r.size, base + off, len, &format!("segment {i}"))?;
        }
        at += size;
    }
    Ok(())
}

fn check_pe(r: &mut Reader, head: &[u8]) -> Result<(), LibFileError> {
    if !head.starts_with(b"MZ") || head.len() < 64 {
        return Err(LibFileError::NotALibrary(describe(head)));
    }
    let e = Endian { little: true };
    let pe = e.u32(head, 0x3c);
    let coff = r.bytes(pe, 24, "PE header")?;
    if !coff.starts_with(b"PE\0\0") {
        return Err(LibFileError::NotALibrary(
            "a DOS file, not a PE library".into(),
        ));
    }
    let sections = e.u16(&coff, 6);
    let optional = e.u16(&coff, 20);
    let table = r.bytes(pe + 24 + optional, sections * 40, "section table")?;
    for i in 0..sections as usize {
        let raw_size = e.u32(&table, i * 40 + 16);
        let raw_at = e.u32(&table, i * 40 + 20);
        within(r.size, raw_at, raw_size, &format!("section {i}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn text_empty_and_directories_are_not_libraries() {
        let dir = std::env::temp_dir().join(format!("condense-libfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = check_library(&write(&dir, "a.so", b"not a library at all")).unwrap_err();
        assert_eq!(e.to_string(), "not a shared library (it is a text file)");
        let e = check_library(&write(&dir, "b.so", b"")).unwrap_err();
        assert_eq!(e.to_string(), "not a shared library (it is an empty file)");
        let e = check_library(&dir).unwrap_err();
        assert_eq!(e.to_string(), "not a shared library (it is a directory)");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    #[test]
    fn cuts_of_a_real_elf_file_are_refused() {
        // The test executable itself is a complete ELF file of this platform, though an
        // executable or a PIE (ET_DYN) depending on the toolchain; what matters here is that
        // every cut of it is refused as truncated or as not a library, never accepted.
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let dir = std::env::temp_dir().join(format!("condense-libfile-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for cut in [10, 63, 64, 1000, 100_000, bytes.len() / 2, bytes.len() - 1] {
            let p = write(&dir, "cut", &bytes[..cut]);
            let e = check_library(&p).unwrap_err().to_string();
            assert!(
                e.starts_with("truncated") || e.contains("executable"),
                "cut at {cut}: {e}"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// One ELF note: `namesz`, `descsz`, `type`, the name and the descriptor padded to `align`.
    fn note(name: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        let e = |n: usize| u32::try_from(n).unwrap().to_ne_bytes();
        let mut b = Vec::new();
        b.extend(e(name.len()));
        b.extend(e(desc.len()));
        b.extend(kind.to_ne_bytes());
        for part in [name, desc] {
            b.extend(part);
            b.resize(b.len().div_ceil(align) * align, 0);
        }
        b
    }

    #[test]
    fn the_build_id_is_the_gnu_note_of_type_3() {
        let e = Endian {
            little: HOST_LITTLE,
        };
        let id = [0xab; 20];
        for align in [4, 8] {
            // Another owner's note of the same type, and a GNU note of another type, first.
            let mut notes = note(b"Go\0", 3, b"not this", align);
            notes.extend(note(b"GNU\0", 1, &[0; 16], align));
            notes.extend(note(b"GNU\0", 3, &id, align));
            assert_eq!(
                gnu_build_id(&notes, e, align),
                Some(id.to_vec()),
                "align {align}"
            );
            // Cut anywhere inside the id (not only its padding): not found, never a read
            // past the end.
            let padding = (align - id.len() % align) % align;
            for cut in (notes.len() - 30)..(notes.len() - padding) {
                assert_eq!(gnu_build_id(&notes[..cut], e, align), None, "cut {cut}");
            }
        }
        // A size past the end is refused, not wrapped.
        let mut huge = note(b"GNU\0", 3, &id, 4);
        huge[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(gnu_build_id(&huge, e, 4), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_real_file_has_one_and_a_copy_the_same() {
        // The test executable: Rust's default link on Linux writes a build id.
        let exe = std::env::current_exe().unwrap();
        let id = build_id(&exe).expect("a build id");
        let dir = std::env::temp_dir().join(format!("condense-libfile-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = write(&dir, "copy", &std::fs::read(&exe).unwrap());
        assert_eq!(build_id(&copy), Some(id.clone()));
        // A position-independent executable is a shared object to the checks: they find the
        // same id on the way.
        if let Ok(file) = check_library(&exe) {
            assert_eq!(file.build_id, Some(id));
        }
        assert_eq!(build_id(&write(&dir, "text", b"hello")), None);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Runs one format's check on `bytes` written to a file.
    fn check_as(
        bytes: &[u8],
        f: fn(&mut Reader, &[u8]) -> Result<(), LibFileError>,
    ) -> Result<(), LibFileError> {
        let dir = std::env::temp_dir().join(format!(
            "condense-libfile-fmt-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let p = write(&dir, "lib", bytes);
        let mut r = Reader {
            file: File::open(&p).unwrap(),
            size: bytes.len() as u64,
        };
        let head = r.bytes(0, r.size.min(64), "header").unwrap();
        let out = f(&mut r, &head);
        std::fs::remove_dir_all(&dir).ok();
        out
    }

    /// A 64-bit little-endian Mach-O dylib with one LC_SEGMENT_64 of `filesize` bytes at 0.
    fn macho(filesize: u64, total: usize) -> Vec<u8> {
        let mut b = vec![0u8; total];
        b[..4].copy_from_slice(&[0xcf, 0xfa, 0xed, 0xfe]);
        b[12..16].copy_from_slice(&6u32.to_le_bytes()); // MH_DYLIB
        b[16..20].copy_from_slice(&1u32.to_le_bytes()); // ncmds
        b[20..24].copy_from_slice(&72u32.to_le_bytes()); // sizeofcmds
        let c = 32;
        b[c..c + 4].copy_from_slice(&0x19u32.to_le_bytes());
        b[c + 4..c + 8].copy_from_slice(&72u32.to_le_bytes());
        b[c + 48..c + 56].copy_from_slice(&filesize.to_le_bytes());
        b
    }

    /// A PE file with one section of `raw_size` bytes at offset 512.
    fn pe(raw_size: u32, total: usize) -> Vec<u8> {
        let mut b = vec![0u8; total];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c..0x40].copy_from_slice(&64u32.to_le_bytes());
        b[64..68].copy_from_slice(b"PE\0\0");
        b[70..72].copy_from_slice(&1u16.to_le_bytes()); // sections
        let t = 64 + 24; // no optional header
        b[t + 16..t + 20].copy_from_slice(&raw_size.to_le_bytes());
        b[t + 20..t + 24].copy_from_slice(&512u32.to_le_bytes());
        b
    }

    #[test]
    fn mach_o_and_pe_extents_are_checked_too() {
        assert!(check_as(&macho(1000, 1000), check_macho).is_ok());
        let e = check_as(&macho(1000, 600), check_macho).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("truncated at 600 bytes (segment 0"),
            "{e}"
        );
        assert!(check_as(&pe(100, 612), check_pe).is_ok());
        let e = check_as(&pe(100, 600), check_pe).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("truncated at 600 bytes (section 0"),
            "{e}"
        );
        let e = check_as(&pe(100, 612), check_macho).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a shared library (it is a Windows (PE) file)"
        );
    }

    #[test]
    fn extents_beyond_the_end_are_truncation() {
        assert!(within(100, 90, 10, "x").is_ok());
        let e = within(100, 90, 11, "section 3").unwrap_err();
        assert_eq!(
            e.to_string(),
            "truncated at 100 bytes (section 3: up to byte 101); copy or build it again"
        );
        assert!(matches!(
            within(100, u64::MAX, 2, "x"),
            Err(LibFileError::Malformed(_))
        ));
    }
}
