"""Campaign files (docs/reference/campaign-format.md): their schema and validation (`spec`) and each run
as a complete scenario drawn from its seed (`generate`). Running them is kraftlab/campaign/."""
