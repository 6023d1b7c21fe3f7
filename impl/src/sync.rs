//! The single facade over synchronisation primitives.
//!
//! Nothing else in the crate names `std::sync`, `loom` or `shuttle` directly:
//! `--cfg loom` selects loom's model-checked primitives, `--cfg shuttle`
//! selects shuttle's, and an ordinary build gets std's. Where the APIs differ,
//! the std side is given loom's shape so code above this module stays free of
//! `cfg`.

#[cfg(loom)]
pub use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(loom)]
pub use loom::thread;

#[cfg(all(shuttle, not(loom)))]
pub use shuttle::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(all(shuttle, not(loom)))]
pub use shuttle::thread;

#[cfg(not(any(loom, shuttle)))]
pub use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(not(any(loom, shuttle)))]
pub use std::thread;

/// Reference counting outside every modelled interleaving: immutable,
/// shared closures such as a metadata file's block loader, and immutable
/// bytes such as the read-only view's cached DAT blocks. Always std's
/// (loom's `Arc` cannot hold an unsized `dyn Fn`), and never used to share
/// mutable state between threads.
pub use std::sync::Arc as StdArc;

/// A scoped thread and a bounded channel outside every modelled
/// interleaving: the checker's read-ahead of the next segment, which
/// shares nothing but the (read-only) device with the thread it feeds.
pub use std::{sync::mpsc::sync_channel as std_sync_channel, thread::scope as std_scope};

/// Take the shared side of a reader-writer lock (poisoning as in [`lock`]).
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    match l.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Take the shared side if nobody holds the exclusive side, without
/// waiting (`None` otherwise, or if poisoned).
pub fn try_read<T>(l: &RwLock<T>) -> Option<RwLockReadGuard<'_, T>> {
    l.try_read().ok()
}

/// Take the exclusive side of a reader-writer lock (poisoning as in [`lock`]).
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    match l.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Lock a mutex, treating poisoning as the broken internal invariant it is
/// (a panic while holding a filesystem lock already lost the state).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Wait on a condition variable, treating poisoning as [`lock`] does. The
/// caller re-checks its condition in a loop: spurious wake-ups are allowed.
pub fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match cv.wait(guard) {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
