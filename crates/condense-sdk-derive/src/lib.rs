//! `#[derive(StageConfig)]`: the documented keys of a stage's `[stage.config]` table, derived
//! from the config struct itself, so a key cannot be documented without existing or exist
//! without being documented.
//!
//! Each named field becomes one key: its name (after a container-level
//! `#[serde(rename_all = "...")]` or a field-level `#[serde(rename = "...")]`) and its `///` doc
//! comment, with the lines joined by spaces. A field without a doc comment is a compile error,
//! as is anything but a struct with named fields. Use it through `condense_abi`, which
//! re-exports it next to the `StageConfig` trait it implements:
//!
//! ```ignore
//! #[derive(Default, serde::Serialize, serde::Deserialize, condense_abi::StageConfig)]
//! #[serde(default, deny_unknown_fields)]
//! pub struct Config {
//!     /// Lines longer than this many characters are cut.
//!     pub max_line_chars: usize,
//! }
//! // Config::KEYS == [("max_line_chars", "Lines longer than this many characters are cut.")]
//! ```

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Expr, ExprLit, Fields, Lit, Meta};

/// Derives `condense_abi::StageConfig` (see the crate docs).
#[proc_macro_derive(StageConfig)]
pub fn derive_stage_config(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match keys(&input) {
        Ok(keys) => {
            let name = &input.ident;
            let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
            let entries = keys.iter().map(|(k, d)| quote! { (#k, #d) });
            quote! {
                impl #impl_generics ::condense_abi::StageConfig for #name #ty_generics #where_clause {
                    const KEYS: &'static [(&'static str, &'static str)] = &[#(#entries),*];
                }
            }
            .into()
        }
        Err(e) => e.to_compile_error().into(),
    }
}

/// `(key, description)` of every field, in declaration order.
fn keys(input: &DeriveInput) -> syn::Result<Vec<(String, String)>> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "StageConfig is derived for structs with named fields only",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "StageConfig is derived for structs with named fields only",
        ));
    };
    let rename_all = serde_value(&input.attrs, "rename_all")?;
    let mut keys = Vec::new();
    for field in &fields.named {
        let Some(ident) = &field.ident else { continue };
        let raw = ident.to_string();
        let raw = raw.strip_prefix("r#").unwrap_or(&raw).to_string();
        let key = match serde_value(&field.attrs, "rename")? {
            Some(renamed) => renamed,
            None => apply_rename_all(&raw, rename_all.as_deref(), ident)?,
        };
        let doc = doc_text(&field.attrs);
        if doc.is_empty() {
            return Err(syn::Error::new_spanned(
                ident,
                format!(
                    "config key `{key}` has no doc comment: write one (`/// ...`), it is what \
                     `condense plugins --details` and docs/stages.md show"
                ),
            ));
        }
        keys.push((key, doc));
    }
    Ok(keys)
}

/// The `///` lines of `attrs`, trimmed and joined by spaces.
fn doc_text(attrs: &[syn::Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value().trim().to_string()),
                _ => None,
            },
            _ => None,
        })
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" ")
}

/// The string value of `#[serde(<name> = "...")]` among `attrs`, if any.
fn serde_value(attrs: &[syn::Attribute], name: &str) -> syn::Result<Option<String>> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(name) {
                let value: syn::LitStr = meta.value()?.parse()?;
                found = Some(value.value());
            } else if meta.input.peek(syn::Token![=]) {
                // Another `key = value` (default = "path", ...): skip its value.
                let _: Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                // A nested list (`rename(serialize = ..)`): skip it.
                let _content;
                syn::parenthesized!(_content in meta.input);
            }
            Ok(())
        })?;
    }
    Ok(found)
}

/// `field` under serde's `rename_all` rule (the rules configs use; others are refused).
fn apply_rename_all(field: &str, rule: Option<&str>, span: &syn::Ident) -> syn::Result<String> {
    Ok(match rule {
        None | Some("snake_case") => field.to_string(),
        Some("lowercase") => field.to_lowercase(),
        Some("kebab-case") => field.replace('_', "-"),
        Some("SCREAMING_SNAKE_CASE") => field.to_uppercase(),
        Some(other) => {
            return Err(syn::Error::new_spanned(
                span,
                format!("StageConfig does not know serde's rename_all = \"{other}\""),
            ))
        }
    })
}
