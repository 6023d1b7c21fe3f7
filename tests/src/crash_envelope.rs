//! The crash-envelope workload and its judgement, in one place for
//! tests/tests/crash_envelope.rs and the throughput benchmark that times
//! it (tests/benches/throughput.rs, `--part crash`).

use nilfs::device::MemDevice;
use nilfs_model::{step, Op, Outcome, Pattern, State};

use crate::lockstep::{format, model_after_format, ImageSpec};

fn text(s: &str) -> Pattern {
    Pattern::Text(s.into())
}

fn blk(tag: &str, count: u64) -> Pattern {
    Pattern::Blk {
        tag: tag.into(),
        first: 0,
        count,
        len: None,
    }
}

/// The workload: 30 operations (syncs, fsync, fdatasync, a snapshot,
/// renames, truncates, links).
pub fn workload() -> Vec<Op> {
    let p = |s: &str| s.to_string();
    vec![
        Op::Mount {
            cp: None,
            ro: false,
        },
        Op::Mkdir {
            path: p("/d"),
            perm: 0o755,
            at: None,
        },
        Op::Create {
            path: p("/a"),
            perm: 0o644,
            excl: true,
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/a"),
            offset: 0,
            data: blk("a", 3),
            at: None,
        },
        Op::Create {
            path: p("/d/b"),
            perm: 0o644,
            excl: true,
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/d/b"),
            offset: 0,
            data: text("first"),
            at: None,
        },
        Op::Sync,
        Op::Write {
            append: false,
            path: p("/a"),
            offset: 5000,
            data: text("overwritten in the middle"),
            at: None,
        },
        Op::Fdatasync {
            path: p("/a"),
            at: None,
        },
        Op::Create {
            path: p("/d/c"),
            perm: 0o600,
            excl: true,
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/d/c"),
            offset: 0,
            data: blk("c", 2),
            at: None,
        },
        Op::Fsync {
            path: p("/d/c"),
            at: None,
        },
        Op::Mkcp { snapshot: true },
        Op::Rename {
            noreplace: false,
            exchange: false,
            old: p("/d/b"),
            new: p("/b"),
            at: None,
        },
        Op::Unlink {
            path: p("/d/c"),
            at: None,
        },
        Op::Truncate {
            path: p("/a"),
            size: 3000,
            at: None,
        },
        Op::Symlink {
            target: p("d"),
            path: p("/l"),
            at: None,
        },
        Op::Link {
            old: p("/a"),
            new: p("/d/a2"),
            at: None,
        },
        Op::Fdatasync {
            path: p("/a"),
            at: None,
        },
        Op::Create {
            path: p("/big"),
            perm: 0o644,
            excl: true,
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/big"),
            offset: 0,
            data: blk("big", 40),
            at: None,
        },
        Op::Sync,
        Op::Write {
            append: false,
            path: p("/big"),
            offset: 8192,
            data: text("tail"),
            at: None,
        },
        Op::Fdatasync {
            path: p("/big"),
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/big"),
            offset: 200_000,
            data: text("past the end"),
            at: None,
        },
        Op::Fsync {
            path: p("/big"),
            at: None,
        },
        Op::Mkdir {
            path: p("/e"),
            perm: 0o700,
            at: None,
        },
        Op::Create {
            path: p("/e/f"),
            perm: 0o644,
            excl: true,
            at: None,
        },
        Op::Write {
            append: false,
            path: p("/e/f"),
            offset: 0,
            data: text("x"),
            at: None,
        },
        Op::Sync,
    ]
}

/// The image it runs on: the default geometry on 16 MiB.
pub fn spec() -> ImageSpec {
    ImageSpec {
        device_bytes: 16 << 20,
        ..ImageSpec::default()
    }
}

/// A fresh image of [`spec`] and the model's state after the format.
pub fn formatted() -> (MemDevice, State) {
    let spec = spec();
    let dev = MemDevice::new(spec.device_bytes);
    let g = format(&dev, &spec).expect("mkfs");
    (dev, model_after_format(g, &spec))
}

/// The model's states after `op` answered `out`, from each of `model`'s;
/// panics if the model allows none (before any cut, the implementation
/// must behave as the model says).
pub fn follow(model: &[State], op: &Op, out: &Outcome) -> Vec<State> {
    let mut next = Vec::new();
    for s in model {
        for b in step(s, op) {
            if let Some(n) = b.accept(out) {
                if !next.contains(&n) {
                    next.push(n);
                }
            }
        }
    }
    assert!(
        !next.is_empty(),
        "the model rejects {op:?} -> {out:?} before any cut"
    );
    next
}

/// The model's crash envelope: the oracle's (`nilfs_oracle::envelope`).
pub use nilfs_oracle::envelope;
