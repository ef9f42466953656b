//! The secure metrics port against a real API server: TokenReview and SubjectAccessReview decide,
//! curl is the scraper.

mod real;
