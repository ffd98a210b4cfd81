"""The Decision runtime: typed questions (boolean, choice, score) answered under a deadline by a
provider, the in-process ONNX reranker or a /rerank endpoint.

    runtime   DecisionRuntime: questions, providers, loading, the deadline
    provider  ScoringProvider: what the runtime asks of every provider; PairScores
    onnx      onnxruntime + tokenizers inference, batching planned to the deadline
    onnx_session  opening an installed ONNX model on the CPU (the reranker's and the embedding model's)
    rerank    /rerank endpoints (TEI, vLLM, Infinity, Cohere, Jina, Voyage shapes)
"""
