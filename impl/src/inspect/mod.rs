//! Inspection of any NILFS2 image: the mount decision explained
//! ([`report`]) and listings in the exact format of the nilfs-tools programs
//! a NILFS2 user knows ([`nilfs_utils`]), fed from the image the way the
//! kernel's ioctls would feed those programs.

pub mod manifest;
pub mod nilfs_utils;
pub mod report;
pub mod tools;
