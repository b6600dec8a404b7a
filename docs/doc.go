// Package docs holds trainbot's documentation pages (one topic a page,
// Markdown) and the tests that keep them honest: every relative link and
// anchor in the READMEs and the pages resolves, and the Chinese pages link
// only to pages and headings that exist. It has no code of its own.
package docs
