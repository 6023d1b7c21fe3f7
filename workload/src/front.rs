//! The generator's front ends: proptest, quickcheck and arbitrary, each a
//! source of the one generator's choices ([`Choices`]) and nothing else.
//!
//! A [`Drawn`] is what a front end draws: a profile, a length and the
//! choices. [`Drawn::workload`] hands them to [`generate_with`] with the
//! caller's configuration (geometry, features, clock), so the same choices
//! give the same workload whichever front end drew them:
//!
//! - `proptest`: [`strategy`] draws a seed; proptest
//!   shrinks the length and the seed, and its regression files keep the
//!   case.
//! - `quickcheck`: `Drawn` is
//!   `quickcheck::Arbitrary`, a tape of numbers from quickcheck's source;
//!   shrinking shortens the workload, cuts the tape and moves its numbers
//!   towards zero (every pick's first option). Every shrunk tape is still
//!   a valid workload: the generator follows the model whatever it draws.
//! - `arbitrary`: `Drawn` is `arbitrary::Arbitrary`,
//!   a profile byte, a length byte and the rest of the input as the tape
//!   ([`Drawn::to_bytes`] is the inverse), so a fuzzer's bytes are
//!   choices of the generator and every input is a valid workload.

use crate::gen::{generate_with, Choices, GenConfig, Profile, Workload};

/// The longest workload a front end draws (generation steps).
pub const MAX_LEN: usize = 40;

/// What a front end drew: the profile, the number of generation steps and
/// the choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub profile: Profile,
    /// Generation steps, 1 to [`MAX_LEN`].
    pub len: usize,
    pub choices: Choices,
}

impl Drawn {
    /// `base` (geometry, features, clock, epilogue) with this profile and
    /// length.
    pub fn config(&self, base: &GenConfig) -> GenConfig {
        GenConfig {
            profile: self.profile,
            len: self.len,
            ..base.clone()
        }
    }

    /// The workload these choices give on `base`'s configuration.
    pub fn workload(&self, base: &GenConfig) -> Workload {
        generate_with(&self.config(base), &self.choices).0
    }

    /// The bytes the `arbitrary` front end reads back as this (a seed's
    /// choices are those it draws on `base`). The committed fuzz corpora
    /// start from seeded workloads made this way.
    pub fn to_bytes(&self, base: &GenConfig) -> Vec<u8> {
        let tape = match &self.choices {
            Choices::Tape(t) => t.clone(),
            Choices::Seed(_) => generate_with(&self.config(base), &self.choices).1,
        };
        let p = Profile::ALL
            .iter()
            .position(|p| *p == self.profile)
            .expect("a profile of ALL");
        let mut out = vec![p as u8, (self.len.clamp(1, MAX_LEN) - 1) as u8];
        for v in tape {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// The inverse of [`Drawn::to_bytes`]: any bytes are a `Drawn` (the
    /// `arbitrary` front end's reading, without the crate).
    pub fn from_bytes(bytes: &[u8]) -> Drawn {
        let (p, l, rest) = match bytes {
            [p, l, rest @ ..] => (*p, *l, rest),
            [p] => (*p, 0, &[][..]),
            [] => (0, 0, &[][..]),
        };
        Drawn {
            profile: Profile::ALL[usize::from(p) % Profile::ALL.len()],
            len: 1 + usize::from(l) % MAX_LEN,
            choices: Choices::from_bytes(rest),
        }
    }
}

/// The proptest front end: a profile, 1 to `max_len` steps and a seed.
pub fn strategy(max_len: usize) -> impl proptest::strategy::Strategy<Value = Drawn> {
    use proptest::prelude::*;
    (
        prop::sample::select(Profile::ALL.to_vec()),
        1..max_len.max(2),
        any::<u64>(),
    )
        .prop_map(|(profile, len, seed)| Drawn {
            profile,
            len,
            choices: Choices::Seed(seed),
        })
}

impl quickcheck::Arbitrary for Drawn {
    fn arbitrary(g: &mut quickcheck::Gen) -> Drawn {
        let profile = *g.choose(&Profile::ALL).expect("profiles");
        let len = 1 + usize::arbitrary(g) % g.size().clamp(1, MAX_LEN);
        // About as many numbers as the steps draw; past the end, zeros.
        let tape = (0..len * 12).map(|_| u64::arbitrary(g)).collect();
        Drawn {
            profile,
            len,
            choices: Choices::Tape(tape),
        }
    }

    /// Shorter workloads first, then a shorter tape, then its numbers
    /// towards zero, a block at a time.
    fn shrink(&self) -> Box<dyn Iterator<Item = Drawn>> {
        let tape = match &self.choices {
            Choices::Tape(t) => t.clone(),
            // A seed's choices are not known without a configuration:
            // shrink the length only.
            Choices::Seed(_) => Vec::new(),
        };
        let seeded = matches!(self.choices, Choices::Seed(_));
        let me = self.clone();
        let mut out: Vec<Drawn> = Vec::new();
        let mut lens = vec![1, me.len / 2, me.len.saturating_sub(1)];
        lens.dedup();
        for len in lens.into_iter().filter(|&l| l >= 1 && l < me.len) {
            out.push(Drawn { len, ..me.clone() });
        }
        if !seeded {
            let with = |t: Vec<u64>| Drawn {
                choices: Choices::Tape(t),
                ..me.clone()
            };
            if !tape.is_empty() {
                out.push(with(tape[..tape.len() / 2].to_vec()));
            }
            let block = (tape.len() / 8).max(1);
            for start in (0..tape.len()).step_by(block) {
                let end = (start + block).min(tape.len());
                if tape[start..end].iter().any(|&v| v != 0) {
                    let mut t = tape.clone();
                    t[start..end].iter_mut().for_each(|v| *v = 0);
                    out.push(with(t));
                }
            }
            for (i, &v) in tape.iter().enumerate() {
                if v > 1 {
                    let mut t = tape.clone();
                    t[i] = v / 2;
                    out.push(with(t));
                }
            }
        }
        Box::new(out.into_iter())
    }
}

impl<'a> arbitrary::Arbitrary<'a> for Drawn {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Drawn> {
        let n = u.len();
        Ok(Drawn::from_bytes(u.bytes(n)?))
    }

    fn arbitrary_take_rest(mut u: arbitrary::Unstructured<'a>) -> arbitrary::Result<Drawn> {
        Self::arbitrary(&mut u)
    }

    fn size_hint(_depth: usize) -> (usize, Option<usize>) {
        (2, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same choices give the same workload, whichever front end drew
    /// them: a seed's recorded choices replayed as a tape, read back from
    /// bytes by `arbitrary`, and carried by a quickcheck value.
    #[test]
    fn the_same_choices_give_the_same_workload() {
        let base = GenConfig::new(0, 0, Profile::Mixed);
        for profile in Profile::ALL {
            for seed in 0..6 {
                let seeded = Drawn {
                    profile,
                    len: 30,
                    choices: Choices::Seed(seed),
                };
                let (w, tape) = generate_with(&seeded.config(&base), &seeded.choices);
                let taped = Drawn {
                    choices: Choices::Tape(tape),
                    ..seeded.clone()
                };
                assert_eq!(taped.workload(&base), w, "{profile:?} {seed}: tape");
                let bytes = seeded.to_bytes(&base);
                assert_eq!(Drawn::from_bytes(&bytes), taped);
                {
                    use arbitrary::Arbitrary;
                    let u = arbitrary::Unstructured::new(&bytes);
                    let a = Drawn::arbitrary_take_rest(u).expect("any bytes");
                    assert_eq!(a.workload(&base), w, "{profile:?} {seed}: arbitrary");
                }
                {
                    // A quickcheck value is a tape: its shrinks are too,
                    // and each is a workload the generator makes.
                    let mut g = quickcheck::Gen::new(30);
                    let q = <Drawn as quickcheck::Arbitrary>::arbitrary(&mut g);
                    let again = Drawn::from_bytes(&q.to_bytes(&base));
                    assert_eq!(again.workload(&base), q.workload(&base));
                }
            }
        }
    }

    /// Any tape is a valid workload, zeros and noise alike, and generation
    /// ends even when the tape keeps asking for left-out actions.
    #[test]
    fn any_tape_is_a_workload() {
        let mut base = GenConfig::new(0, 0, Profile::Checkpoints);
        base.features = crate::gen::Features::FUSE;
        for tape in [
            vec![],
            vec![0; 100],
            vec![u64::MAX; 100],
            (0..500u64).map(|i| i.wrapping_mul(0x9e37_79b9)).collect(),
        ] {
            for profile in Profile::ALL {
                let d = Drawn {
                    profile,
                    len: MAX_LEN,
                    choices: Choices::Tape(tape.clone()),
                };
                assert!(d.workload(&base).lines.len() > 2);
            }
        }
    }

    #[test]
    fn quickcheck_shrinks_towards_simpler_choices() {
        use quickcheck::Arbitrary;
        let d = Drawn {
            profile: Profile::Data,
            len: 10,
            choices: Choices::Tape(vec![7; 40]),
        };
        let shrunk: Vec<Drawn> = d.shrink().collect();
        assert!(shrunk.iter().any(|s| s.len < d.len));
        assert!(shrunk
            .iter()
            .any(|s| matches!(&s.choices, Choices::Tape(t) if t.iter().sum::<u64>() < 280)));
        assert!(!shrunk.contains(&d));
    }
}
