//! Tests of the translations.
