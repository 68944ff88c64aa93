"""Local LLM: GGUF models, tokenizer, chat and an OpenAI-compatible server (`python -m fusegrad.llm`)."""
