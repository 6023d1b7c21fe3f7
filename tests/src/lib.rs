//! nilfs-conformance: the harness that checks nilfs-ref against real NILFS2
//! peers (nilfs-tools, GRUB, the Linux kernel) and, later, against the model.
