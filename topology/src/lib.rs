//! Topology files, generators and offline LID assignment.
