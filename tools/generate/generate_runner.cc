#include "tools/generate/generate_runner.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "common/kv/kv_dtype.h"
#include "common/model/model_weights.h"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "common/util/clock.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "tools/generate/generate_backend.h"
#include "tools/generate/prompt_input.h"

namespace tandem {
namespace {

struct PreparedPrompt {
  PromptInput input;
  std::vector<TokenId> ids;
};

// The model directory's tokenizer and chat template.
struct TextSide {
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<TokenizerConfig> config;  // tokenizer_config.json, when present
};

absl::StatusOr<TextSide> LoadTextSide(const std::string& model_dir) {
  TextSide side;
  ASSIGN_OR_RETURN(side.tokenizer, Tokenizer::FromFile(model_dir + "/tokenizer.json"));
  auto config = LoadTokenizerConfig(model_dir);
  if (config.ok()) {
    side.config = *std::move(config);
  } else if (!absl::IsNotFound(config.status())) {
    return config.status();
  }
  return side;
}

absl::StatusOr<std::vector<TokenId>> Tokenize(const GenerateOptions& options, const TextSide& text,
                                              const PromptInput& input) {
  switch (input.kind) {
    case PromptInput::Kind::kTokenIds:
      return input.token_ids;
    case PromptInput::Kind::kText:
      if (!options.chat) return text.tokenizer->Encode(input.text, options.add_special_tokens);
      [[fallthrough]];
    case PromptInput::Kind::kMessages: {
      if (!text.config.has_value() || text.config->chat_template.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            options.model_dir, "/tokenizer_config.json: the model has no chat_template"));
      }
      ChatTemplateInputs chat;
      if (input.kind == PromptInput::Kind::kText) {
        chat.messages.push_back(ChatMessage{.role = "user", .content = input.text});
      } else {
        for (const auto& [role, content] : input.messages) {
          chat.messages.push_back(ChatMessage{.role = role, .content = content});
        }
      }
      chat.add_generation_prompt = true;
      chat.bos_token = text.config->bos_token.value_or("");
      chat.eos_token = text.config->eos_token.value_or("");
      ASSIGN_OR_RETURN(ChatTemplate chat_template, ChatTemplate::Parse(text.config->chat_template));
      ASSIGN_OR_RETURN(std::string rendered, chat_template.Render(chat));
      // The template writes BOS itself; the post-processor must not add a second one.
      return text.tokenizer->Encode(rendered, /*add_special_tokens=*/false);
    }
  }
  return absl::InternalError("unknown prompt kind");
}

nlohmann::json ResultJson(size_t index, const PreparedPrompt& prompt,
                          const GenerationResult& result, const Tokenizer& tokenizer,
                          bool include_logprobs) {
  nlohmann::json j;
  j["index"] = index;
  if (prompt.input.kind == PromptInput::Kind::kText) j["prompt"] = prompt.input.text;
  j["prompt_token_ids"] = prompt.ids;
  j["token_ids"] = result.tokens;
  j["text"] = tokenizer.Decode(result.tokens, /*skip_special_tokens=*/true);
  if (result.status.ok()) {
    j["finish_reason"] = std::string(FinishReasonName(result.finish_reason));
  } else {
    j["error"] = result.status.ToString();
  }
  j["usage"] = {{"prompt_tokens", result.usage.prompt_tokens},
                {"completion_tokens", result.usage.completion_tokens},
                {"cached_tokens", result.usage.cached_tokens}};
  if (include_logprobs) {
    nlohmann::json lps = nlohmann::json::array();
    for (size_t i = 0; i < result.tokens.size(); ++i) {
      nlohmann::json entry = {{"token_id", result.tokens[i]}, {"logprob", result.logprobs[i]}};
      nlohmann::json top = nlohmann::json::array();
      if (i < result.top_logprobs.size()) {
        for (const TokenLogprob& t : result.top_logprobs[i]) {
          top.push_back({{"token_id", t.token}, {"logprob", t.logprob}});
        }
      }
      entry["top_logprobs"] = std::move(top);
      lps.push_back(std::move(entry));
    }
    j["logprobs"] = std::move(lps);
  }
  return j;
}

}  // namespace

absl::Status RunGenerate(const GenerateOptions& options, std::ostream& out) {
  // Prompts first: bad input fails before the (slower) model load.
  std::vector<PreparedPrompt> prompts;
  if (options.prompts_file.has_value()) {
    ASSIGN_OR_RETURN(std::vector<PromptInput> inputs, ReadPromptsFile(*options.prompts_file));
    for (PromptInput& in : inputs) prompts.push_back(PreparedPrompt{.input = std::move(in)});
  } else if (options.prompt.has_value()) {
    prompts.push_back(PreparedPrompt{
        .input = PromptInput{.kind = PromptInput::Kind::kText, .text = *options.prompt}});
  } else {
    return absl::InvalidArgumentError("give --prompt TEXT or --prompts-file FILE");
  }
  RETURN_IF_ERROR(options.sampling.Validate(std::numeric_limits<int>::max()));
  RETURN_IF_ERROR(options.speculative.Validate());

  // A bad --backend (or cuda without a GPU) fails before the model loads.
  RETURN_IF_ERROR(CheckGenerateBackend(options));

  ASSIGN_OR_RETURN(TextSide text, LoadTextSide(options.model_dir));
  for (PreparedPrompt& p : prompts) {
    ASSIGN_OR_RETURN(p.ids, Tokenize(options, text, p.input));
  }

  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(options.model_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateGenerateBackend(options, weights));
  weights = ModelWeights();  // the backend holds its own copy; unmap the files
  spdlog::info(
      "model {} on the {} backend: {} layers, hidden {}, vocab {}; KV pool {} blocks of {} "
      "tokens, {}",
      options.model_dir, backend->name(), backend->config().num_layers,
      backend->config().hidden_size, backend->config().vocab_size, backend->kv_layout().num_blocks,
      backend->kv_layout().block_size, KvDTypeName(backend->kv_layout().dtype));

  EngineOptions engine_options;
  engine_options.scheduler.max_num_batched_tokens = options.max_num_batched_tokens;
  engine_options.scheduler.max_num_seqs = options.max_num_seqs;
  engine_options.enable_prefix_caching = options.enable_prefix_caching;
  engine_options.speculative = options.speculative;
  std::shared_ptr<DraftModel> draft;
  if (options.speculative.method == SpeculativeMethod::kDraft) {
    // The draft runs on the target's backend kind, with its own pool.
    ASSIGN_OR_RETURN(
        draft,
        LoadDraftModel(options.speculative.draft_model_dir, options.model_dir, *backend,
                       options.max_num_batched_tokens, options.max_num_seqs,
                       [&options](int32_t blocks) -> absl::StatusOr<std::unique_ptr<Backend>> {
                         ASSIGN_OR_RETURN(ModelWeights draft_weights,
                                          LoadModelWeights(options.speculative.draft_model_dir));
                         GenerateOptions draft_options = options;
                         draft_options.num_kv_blocks = blocks;
                         return CreateGenerateBackend(draft_options, draft_weights);
                       }));
    engine_options.draft_model = draft;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(backend.get(), engine_options));

  // Validate every request before running any, so a bad prompt fails the whole run cleanly.
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto stream = std::make_unique<RequestStream>();
    GenerateRequest request;
    request.prompt = prompts[i].ids;
    request.params = options.sampling;
    request.on_event = stream->Callback();
    auto id = engine->Submit(std::move(request));
    if (!id.ok()) {
      return absl::Status(id.status().code(),
                          absl::StrCat("prompt ", i, ": ", id.status().message()));
    }
    streams.push_back(std::move(stream));
  }
  const int64_t run_start = Clock::Real()->NowNanos();
  absl::Status run_status = engine->RunUntilIdle();
  const double run_seconds = static_cast<double>(Clock::Real()->NowNanos() - run_start) * 1e-9;
  const EngineStats stats = engine->Stats();
  spdlog::info("engine: {} steps, {} tokens computed, {} generated, {:.3f} s", stats.num_steps,
               stats.num_batched_tokens, stats.num_generated_tokens, run_seconds);
  if (options.speculative.enabled()) {
    const double v = static_cast<double>(std::max<int64_t>(stats.num_spec_verifications, 1));
    spdlog::info(
        "speculative ({}): {} verifications, {} drafts, {} accepted ({:.1f}%), {:.2f} tokens per "
        "verification",
        SpeculativeMethodName(options.speculative.method), stats.num_spec_verifications,
        stats.num_spec_draft_tokens, stats.num_spec_accepted_tokens,
        100.0 * static_cast<double>(stats.num_spec_accepted_tokens) /
            static_cast<double>(std::max<int64_t>(stats.num_spec_draft_tokens, 1)),
        1.0 + static_cast<double>(stats.num_spec_accepted_tokens) / v);
  }
  if (draft != nullptr) {
    const DraftModelStats& d = draft->stats();
    spdlog::info("draft model: {} passes, {} context tokens caught up, {} drafts, {:.3f} s",
                 d.num_forwards, d.num_catch_up_tokens, d.num_proposed_tokens,
                 static_cast<double>(d.busy_nanos) * 1e-9);
  }

  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationResult result = streams[i]->Wait();
    out << ResultJson(i, prompts[i], result, *text.tokenizer, options.include_logprobs).dump()
        << "\n";
  }
  out.flush();
  return run_status;
}

}  // namespace tandem
