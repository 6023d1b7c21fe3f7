//! The segment constructor: turning dirty blocks into logs on disk.
//!
//! Split, unlike the kernel's segment.c, into the layout of logs
//! ([`layout`]) and the writing of a laid-out log ([`write`]); the stages
//! that collect dirty blocks and the checkpoint they make come on top.

pub mod layout;
pub mod write;
