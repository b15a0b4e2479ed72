//! Tests of the export.
