//! The image judgement every campaign shares: `nilref check` on an image
//! an implementation wrote.

use crate::campaign::common::problem::Problem;

/// `nilref check` on an image, every valid checkpoint: an error is a
/// problem (warnings, such as the kernel's unlinked-but-allocated inodes,
/// are not).
pub fn image_check(dev: &dyn nilfs::device::BlockDevice, whose: &str) -> Vec<Problem> {
    let report = nilfs::check::check_device(
        dev,
        &nilfs::check::Options {
            checkpoints: nilfs::check::Checkpoints::All,
            ..Default::default()
        },
    );
    if report.is_clean() {
        return Vec::new();
    }
    let first = report
        .findings
        .iter()
        .find(|f| f.code.severity() == nilfs::check::Severity::Error)
        .map(|f| f.code.id().to_string())
        .unwrap_or_else(|| "operational".to_string());
    vec![Problem {
        class: "check",
        key: first,
        detail: format!("nilref check finds {whose} unclean:\n{report}"),
    }]
}
