//! Running a target: generate cases from a seed, check each, count what happened, minimize
//! and keep what failed; and replaying the kept cases.

use crate::binary::{self, Binary, Compressed};
use crate::corpus::{self, Seed};
use crate::minimize::minimize;
use crate::rng::Rng;
use crate::{check_reader, knowing, pipeline, Failure, FailureKind, FuzzError, Target, Verdict};
use condense_formats::Format;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Seeds bigger than this are cut down (in-process targets).
const READ_LIMIT: usize = 48 * 1024;
/// The same for targets that run the binary (a process per case).
const BINARY_LIMIT: usize = 16 * 1024;
/// Minimizer attempts in-process (through the binary: [`Config::minimize_binary`]).
const MINIMIZE_IN_PROCESS: usize = 3_000;
/// The biggest huge string of a binary target's case.
const BINARY_HUGE: usize = 256 * 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub target: Target,
    pub seed: u64,
    /// At most this many cases.
    pub cases: u64,
    /// Stop starting cases after this instant (`cargo xtask fuzz`).
    pub until: Option<Instant>,
    /// The repository (fixtures are read from `tests/fixtures`).
    pub root: PathBuf,
    pub binary: Option<Binary>,
    /// Minimized failures go to `<failures>/<target>/`.
    pub failures: PathBuf,
    /// Scratch space for binary runs.
    pub work: PathBuf,
    /// How many failures to minimize and keep (the rest are only counted).
    pub keep: usize,
    /// An in-process case slower than this counts as a hang (`None`: never).
    pub hang_after: Option<Duration>,
    /// Minimizer attempts for a target that runs the binary (each is one or two runs).
    pub minimize_binary: usize,
}

/// Counts for docs/reliability.md.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub inputs: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub crashes: u64,
    pub hangs: u64,
    pub round_trips: u64,
    pub bad_errors: u64,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.inputs += other.inputs;
        self.accepted += other.accepted;
        self.rejected += other.rejected;
        self.crashes += other.crashes;
        self.hangs += other.hangs;
        self.round_trips += other.round_trips;
        self.bad_errors += other.bad_errors;
    }

    pub fn failures(&self) -> u64 {
        self.crashes + self.hangs + self.round_trips + self.bad_errors
    }

    fn count(&mut self, verdict: &Verdict) {
        self.inputs += 1;
        match verdict {
            Verdict::Accepted => self.accepted += 1,
            Verdict::Rejected => self.rejected += 1,
            Verdict::Failed(f) => match f.kind {
                FailureKind::Crash => self.crashes += 1,
                FailureKind::Hang => self.hangs += 1,
                FailureKind::RoundTrip => self.round_trips += 1,
                FailureKind::BadError => self.bad_errors += 1,
            },
        }
    }
}

/// One kept failure.
#[derive(Debug, Clone)]
pub struct Found {
    pub case: u64,
    pub seed_name: String,
    pub ops: Vec<&'static str>,
    pub failure: Failure,
    /// The minimized input.
    pub path: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub target: Target,
    pub seed: u64,
    pub stats: Stats,
    pub found: Vec<Found>,
}

impl Report {
    /// Several lines: the counts, then each kept failure with how to replay it.
    pub fn describe(&self) -> String {
        let s = &self.stats;
        let mut out = format!(
            "{}: seed {} (CONDENSE_FUZZ_SEED={}): {} inputs, {} accepted, {} rejected, {} crashes, {} hangs, {} round-trip failures, {} bad errors",
            self.target, self.seed, self.seed, s.inputs, s.accepted, s.rejected, s.crashes, s.hangs, s.round_trips, s.bad_errors
        );
        for f in &self.found {
            let _ = write!(
                out,
                "\n  case {} from {} ({}): {}: {}\n    minimized input: {}",
                f.case,
                f.seed_name,
                f.ops.join(", "),
                f.failure.kind,
                f.failure.detail,
                f.path.display()
            );
        }
        out
    }
}

/// The inputs of a target.
fn seeds(config: &Config) -> Result<Vec<Seed>, FuzzError> {
    let root = &config.root;
    match config.target {
        Target::Read(f) => corpus::conversations(root, f, READ_LIMIT),
        Target::Pipeline => corpus::pipelines(root),
        Target::Compress(f) => corpus::conversations(root, f, BINARY_LIMIT),
        Target::Expand => {
            let mut all = Vec::new();
            for f in Format::ALL {
                all.extend(corpus::conversations(root, f, BINARY_LIMIT)?);
            }
            Ok(all)
        }
    }
}

/// Runs a campaign.
pub fn run(config: &Config) -> Result<Report, FuzzError> {
    let seeds = seeds(config)?;
    let others: Vec<&[u8]> = seeds.iter().map(|s| s.bytes.as_slice()).collect();
    let bin = match (config.target.needs_binary(), &config.binary) {
        (true, None) => return Err(FuzzError::NoBinary(config.target.to_string())),
        (_, b) => b.clone(),
    };
    let io = |e| FuzzError::Io(config.work.clone(), e);
    std::fs::create_dir_all(&config.work).map_err(io)?;
    // Expand: each seed compressed once, then its output mutated.
    let mut compressed: Vec<Option<Option<Compressed>>> = seeds.iter().map(|_| None).collect();
    let mut report = Report {
        target: config.target,
        seed: config.seed,
        stats: Stats::default(),
        found: Vec::new(),
    };
    let mut minimized: HashSet<(FailureKind, Vec<&'static str>)> = HashSet::new();
    for case in 0..config.cases {
        if config.until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
        let mut rng = Rng::for_case(config.seed, case);
        let si = rng.below(seeds.len());
        let seed = &seeds[si];
        let start = Instant::now();
        let (input, ops, verdict, base) = match config.target {
            Target::Read(format) => {
                let (input, ops) = crate::mutate::mutate(&seed.bytes, &others, &mut rng);
                let forced = rng.chance(1, 2).then_some(format);
                let earlier = knowing::earlier(&seed.bytes, rng.below(100));
                let v = check_read(earlier, &input, &seed.file_name, forced);
                (input, ops, v, None)
            }
            Target::Pipeline => {
                let (input, ops) = pipeline::mutate(&seed.bytes, &others, &mut rng);
                let v = pipeline::check(&input);
                (input, ops, v, None)
            }
            Target::Compress(_) => {
                let bin = bin
                    .as_ref()
                    .ok_or(FuzzError::NoBinary(config.target.to_string()))?;
                let (input, ops) =
                    crate::mutate::mutate_within(&seed.bytes, &others, &mut rng, BINARY_HUGE);
                let v = binary::check_compress(bin, &input, &seed.file_name, &config.work);
                (input, ops, v, None)
            }
            Target::Expand => {
                let bin = bin
                    .as_ref()
                    .ok_or(FuzzError::NoBinary(config.target.to_string()))?;
                if compressed[si].is_none() {
                    let c = binary::compress_once(bin, &seed.bytes, &seed.file_name, &config.work)
                        .map_err(io)?;
                    compressed[si] = Some(c);
                }
                let Some(Some(base)) = &compressed[si] else {
                    continue;
                };
                let (input, ops) =
                    crate::mutate::mutate_within(&base.bytes, &others, &mut rng, BINARY_HUGE);
                let v = binary::check_expand(bin, base, &input);
                (input, ops, v, Some(base))
            }
        };
        let verdict = match (verdict, config.hang_after) {
            (Verdict::Failed(f), _) => Verdict::Failed(f),
            (v, Some(limit)) if !config.target.needs_binary() && start.elapsed() > limit => {
                let _ = v;
                Verdict::Failed(Failure {
                    kind: FailureKind::Hang,
                    detail: format!("took {:.1} s", start.elapsed().as_secs_f64()),
                })
            }
            (v, _) => v,
        };
        report.stats.count(&verdict);
        let Verdict::Failed(failure) = verdict else {
            continue;
        };
        let mut sorted_ops = ops.clone();
        sorted_ops.sort_unstable();
        if report.found.len() >= config.keep || !minimized.insert((failure.kind, sorted_ops)) {
            continue;
        }
        let small = if failure.kind == FailureKind::Hang {
            input.clone()
        } else {
            shrink(config, bin.as_ref(), seed, base, &input, failure.kind)
        };
        let path = keep(config, seed, &small, &seed.bytes)?;
        report.found.push(Found {
            case,
            seed_name: seed.name.clone(),
            ops,
            failure,
            path,
        });
    }
    Ok(report)
}

/// A read target's case: [`check_reader`], then, for an input it accepted, the read knowing
/// the list a read of `earlier` (the seed, or its first lines) kept ([`knowing`]).
fn check_read(earlier: &[u8], input: &[u8], name: &str, format: Option<Format>) -> Verdict {
    match check_reader(input, name, format) {
        Verdict::Accepted => knowing::check_knowing(earlier, input, name, format),
        other => other,
    }
}

/// The input minimized while it fails with the same kind.
fn shrink(
    config: &Config,
    bin: Option<&Binary>,
    seed: &Seed,
    base: Option<&Compressed>,
    input: &[u8],
    kind: FailureKind,
) -> Vec<u8> {
    let same = |v: Verdict| matches!(v, Verdict::Failed(f) if f.kind == kind);
    match (config.target, bin) {
        (Target::Read(format), _) => minimize(input, MINIMIZE_IN_PROCESS, |c| {
            let name = &seed.file_name;
            // Any earlier input it failed knowing: the whole seed, or its first half.
            [100, 49].into_iter().any(|percent| {
                let earlier = knowing::earlier(&seed.bytes, percent);
                same(check_read(earlier, c, name, Some(format)))
                    || same(check_read(earlier, c, name, None))
            })
        }),
        (Target::Pipeline, _) => minimize(input, MINIMIZE_IN_PROCESS, |c| same(pipeline::check(c))),
        (Target::Compress(_), Some(bin)) => minimize(input, config.minimize_binary, |c| {
            same(binary::check_compress(
                bin,
                c,
                &seed.file_name,
                &config.work,
            ))
        }),
        (Target::Expand, Some(bin)) => match base {
            Some(base) => minimize(input, config.minimize_binary, |c| {
                same(binary::check_expand(bin, base, c))
            }),
            None => input.to_vec(),
        },
        _ => input.to_vec(),
    }
}

/// Writes a minimized failure: `<failures>/<target>/<hash>-<file name>` (expand: a folder
/// holding the input that was compressed and the mutated compressed file).
fn keep(config: &Config, seed: &Seed, bytes: &[u8], original: &[u8]) -> Result<PathBuf, FuzzError> {
    let dir = config.failures.join(config.target.to_string());
    // The seed's name is part of the hash: two seeds can minimize to the same bytes.
    let mut named = bytes.to_vec();
    named.extend_from_slice(seed.name.as_bytes());
    let hash = format!("{:016x}", twox_hash::XxHash3_64::oneshot(&named));
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| FuzzError::Io(p, e)
    };
    let path = if config.target == Target::Expand {
        let case = dir.join(&hash);
        std::fs::create_dir_all(&case).map_err(io(&case))?;
        let input = case.join(format!("input-{}", seed.file_name));
        std::fs::write(&input, original).map_err(io(&input))?;
        case.join(format!("mutated-{}", seed.file_name))
    } else {
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        dir.join(format!("{hash}-{}", seed.file_name))
    };
    std::fs::write(&path, bytes).map_err(io(&path))?;
    Ok(path)
}

/// Runs every kept case of `target` under `dir/<target>/` again; returns each with its
/// verdict (a reader case is read with the format forced and detected: both must hold).
pub fn replay(
    target: Target,
    dir: &Path,
    bin: Option<&Binary>,
    work: &Path,
) -> Result<Vec<(PathBuf, Verdict)>, FuzzError> {
    let folder = dir.join(target.to_string());
    if !folder.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for path in corpus::read_dir(&folder)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        // `<hash>-<file name>`: the file name the case was read under.
        let source = name
            .split_once('-')
            .map_or(name.as_str(), |(_, s)| s)
            .to_string();
        let read = |p: &Path| std::fs::read(p).map_err(|e| FuzzError::Io(p.to_path_buf(), e));
        let verdict = match (target, bin) {
            (Target::Read(format), _) => {
                let bytes = read(&path)?;
                match check_reader(&bytes, &source, Some(format)) {
                    Verdict::Failed(f) => Verdict::Failed(f),
                    _ => check_reader(&bytes, &source, None),
                }
            }
            (Target::Pipeline, _) => pipeline::check(&read(&path)?),
            (Target::Compress(_), Some(bin)) => {
                binary::check_compress(bin, &read(&path)?, &source, work)
            }
            (Target::Expand, Some(bin)) => {
                let files = corpus::read_dir(&path)?;
                let find = |prefix: &str| {
                    files.iter().find(|f| {
                        f.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                    })
                };
                let (Some(input), Some(mutated)) = (find("input-"), find("mutated-")) else {
                    continue;
                };
                let file_name = input
                    .file_name()
                    .map(|n| n.to_string_lossy().trim_start_matches("input-").to_string())
                    .unwrap_or_default();
                match binary::compress_once(bin, &read(input)?, &file_name, work)
                    .map_err(|e| FuzzError::Io(work.to_path_buf(), e))?
                {
                    Some(base) => binary::check_expand(bin, &base, &read(mutated)?),
                    None => Verdict::Rejected,
                }
            }
            _ => return Err(FuzzError::NoBinary(target.to_string())),
        };
        out.push((path, verdict));
    }
    Ok(out)
}
