// The gridwarp program's command line: its logger, its commands and its exit statuses.
#include "command_line.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_common.hpp"
#include "messages.hpp"
#include "command_runner.hpp"

namespace gridwarp::cli {

namespace {

// The message of a log line, its control characters written out.
class EscapedMessage : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& message, const std::tm&, spdlog::memory_buf_t& out) override {
        const std::string text = escape_control_characters(std::string_view(message.payload.data(), message.payload.size()));
        out.append(text.data(), text.data() + text.size());
    }
    std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedMessage>(); }
};

// Option descriptions wrapped to the terminal's customary 100 columns, under their own column.
class WrappingFormatter : public CLI::Formatter {
public:
    std::string make_option_desc(const CLI::Option* option) const override {
        constexpr std::size_t kWidth = 100;
        const std::size_t room = kWidth > get_column_width() + 20 ? kWidth - get_column_width() : 20;
        std::string wrapped, word;
        std::size_t line = 0;
        std::istringstream words(option->get_description());
        while (words >> word) {
            if (line > 0 && line + 1 + word.size() > room) {
                wrapped += '\n';
                line = 0;
            } else if (line > 0) {
                wrapped += ' ';
                ++line;
            }
            wrapped += word;
            line += word.size();
        }
        return wrapped;
    }
};

}  // namespace

int run_command_line(int argc, char** argv, const char* version) {
    // The version needs neither the logger nor a command: answered before either is built.
    if (argc == 2 && std::string_view(argv[1]) == "--version") {
        std::printf("gridwarp %s\n", version);
        return 0;
    }
    // Messages go to stderr so that stdout stays clean for data (gridwarp info --json), through the
    // descriptor taken before any reader can capture descriptor 2 (messages.hpp).
    std::FILE* messages = ::fdopen(original_stderr(), "w");
    auto sink = std::make_shared<spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>>(messages ? messages : stderr,
                                                                                               spdlog::color_mode::automatic);
    auto logger = std::make_shared<spdlog::logger>("gridwarp", std::move(sink));
    // Every message is one line: the control characters of a name it quotes are written out.
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<EscapedMessage>('*').set_pattern("gridwarp: %^%l%$: %*");
    logger->set_formatter(std::move(formatter));
    spdlog::set_default_logger(logger);

    CLI::App app{"gridwarp: exact N-D grid sampling (ONNX GridSample / AffineGrid) for images, volumes and tensors"};
    app.set_version_flag("--version", std::string("gridwarp ") + version);
    app.formatter(std::make_shared<WrappingFormatter>());
    app.require_subcommand(1);
    // One line for command-line mistakes too, in the same form as every other error.
    // A mistyped option or command is named, with the nearest known one, before what CLI11 says of
    // its consequence (a required option seen as missing, an argument not expected).
    app.failure_message([](const CLI::App* command, const CLI::Error& e) {
        const auto used = command->get_subcommands();
        const std::string help = used.empty() ? "gridwarp --help" : "gridwarp " + used.front()->get_name() + " --help";
        const std::string unknown = unknown_argument(*command);
        return "gridwarp: error: " + escape_control_characters(unknown.empty() ? std::string(e.what()) : unknown) +
               " (see '" + help + "')\n";
    });
    app.footer("Run 'gridwarp COMMAND --help' for a command's options and examples, 'gridwarp help modes' for every\n"
               "interpolation mode.\nDocs: docs/cli.md");
    // A command line that names a command needs only that command's options; help reads every
    // command's.
    const CommandEntry* named = argc > 1 ? find_command(argv[1]) : nullptr;
    for (const CommandEntry& entry : command_table()) {
        if (named && named->name != "help" && &entry != named) continue;
        entry.registrar(app);
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // Every command-line mistake exits with 2, the usage-error status (docs/cli.md); --help and
        // --version with 0.
        return app.exit(e) == 0 ? 0 : 2;
    } catch (const ExitStatus& e) {
        if (*e.what()) spdlog::error("{}", e.what());
        return e.code();
    } catch (const std::exception& e) {
        // Subcommand callbacks run inside parse(): every failure ends here as one line.
        spdlog::error("{}", e.what());
        return 1;
    }
    return 0;
}

}  // namespace gridwarp::cli
