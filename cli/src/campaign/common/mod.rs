//! What the kernel, GRUB and crash campaigns share, one copy each: the
//! workloads, the problems, the findings folders and tables, the shrink
//! loop and the image judgement. It knows no campaign.

pub mod args;
pub mod findings;
pub mod image;
pub mod problem;
pub mod shrink;
pub mod workload;

pub use args::{CampaignArgs, Options};
pub use findings::{bar, Evidence, Finding, FindingFolder, Summary};
pub use image::image_check;
pub use problem::{first_difference, problem_name, Problem};
pub use shrink::{same_problem, shrink_batched, shrink_each};
pub use workload::Workload;
